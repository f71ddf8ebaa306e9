"""What every test client that stands for vLLM's or SGLang's HF3FS
connector shares: its requests Session, with the retry policy both
connectors give it (urllib3 Retry(total=3, backoff_factor=0.3,
status_forcelist=[500, 502, 503, 504], allowed_methods=["GET", "POST"]):
about 1.8 s of retries in all) and no retry of its own, and its loop until
the test stops it (closes its stdin)."""
import json
import sys
import threading
import time

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import NewConnectionError
from urllib3.util.retry import Retry


def engine_session():
    """engine_session is a keep-alive Session that retries as vLLM's and SGLang's clients do."""
    session = requests.Session()
    retry = Retry(total=3, backoff_factor=0.3, status_forcelist=[500, 502, 503, 504], allowed_methods=["GET", "POST"])
    session.mount("http://", HTTPAdapter(max_retries=retry))
    return session


class Calls:
    """Calls sends one process's calls on its engine_session, counting them and the longest (its retries included: when it began, to what URL), and keeps the errors its loop meets."""

    def __init__(self):
        self.session = engine_session()
        self.count = 0
        self.longest = 0.0
        self.longest_began = ""
        self.longest_url = ""
        self.retried = 0
        self.refused = 0
        self.unreached = 0
        self.last_unreached = False
        self.errors = []

    def post(self, url, **kwargs):
        """post sends one call (requests' json= or data= and headers=) and returns its JSON answer, None for none (204)."""
        self.count += 1
        began = utc_now()
        started = time.monotonic()
        try:
            res = self.session.post(url, **kwargs)
            # urllib3 keeps the tries it made before this answer: a refused connection, a 503.
            if res.raw.retries is not None and res.raw.retries.history:
                self.retried += 1
                if any(isinstance(h.error, NewConnectionError) for h in res.raw.retries.history):
                    self.refused += 1
            res.raise_for_status()
            # A relay that reached no server for --read-hold answered a read's keys as misses: a hint of nothing.
            self.last_unreached = res.headers.get("hf3fs-unreached") == "1"
            self.unreached += self.last_unreached
            return None if res.status_code == 204 or not res.content else res.json()
        finally:
            took = time.monotonic() - started
            if took > self.longest:
                self.longest, self.longest_began, self.longest_url = took, began, url

    def report(self, **fields):
        """report prints the process's summary line: its calls, those answered after a retry (and of them after a connection refused), reads answered as misses by a relay that reached no server, errors, longest call (in seconds, when it began in UTC, its URL), and fields."""
        longest = dict(longestCallSeconds=round(self.longest, 3), longestCallBegan=self.longest_began, longestCallUrl=self.longest_url)
        counts = dict(calls=self.count, retried=self.retried, refused=self.refused, unreached=self.unreached)
        print(json.dumps(dict(**counts, errors=self.errors, **longest, **fields)), flush=True)


def stopped_when_stdin_closes():
    """stopped_when_stdin_closes is an Event set once the test closes this process's stdin."""
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    return stopped


def utc_now():
    """utc_now is the time of day in UTC to the millisecond, as an error's mark, to set it beside the test's own log of what it did."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(now)) + ".%03d" % (int(now * 1000) % 1000)


def loop(step, errors, every=1):
    """loop calls step(i) until stdin closes, counting each failure in errors and printing {"steps": N} every `every` turns; it returns N."""
    stopped = stopped_when_stdin_closes()
    i = 0
    while not stopped.is_set():
        try:
            step(i)
        except Exception as error:  # every failure is what the test counts
            errors.append("%s %s: %s" % (utc_now(), type(error).__name__, str(error)[:300]))
        i += 1
        if i % every == 0:
            print(json.dumps({"steps": i}), flush=True)
    return i


def write_key(post, rank, key):
    """write_key allocates a page for key on rank and confirms it, as a vLLM worker does, through post(path, body); it raises on a wrong answer."""
    results = post("/keys/batch_allocate", {"rank": rank, "keys": [[key, None]]})["results"]
    page = results[0][1]
    if results[0][0] != key or not isinstance(page, int) or page < 0:
        raise AssertionError("batch_allocate on rank %d answered %s" % (rank, results))
    post("/keys/confirm_write", {"rank": rank, "confirmations": [[key, page]]})


def initialize_then_loop(errors, initialize, step):
    """initialize_then_loop calls initialize() once (its failure counted in errors), then loop(step) until stdin closes; it returns the turns."""
    try:
        initialize()
    except Exception as error:  # counted, and the loop still runs: its calls show whether the server recovers
        errors.append("%s initialize: %s: %s" % (utc_now(), type(error).__name__, str(error)[:300]))
    return loop(step, errors)


def recent_keys(name, i):
    """recent_keys are the keys a reader asks of at its i-th turn: name-N around N = 4i, as if a writer wrote 4 a turn."""
    return ["%s-%d" % (name, j) for j in range(max(0, i * 4 - 8), i * 4 + 8)]


def check_flags(route, flags, keys):
    """check_flags raises unless flags, an answer of route, holds one bool per key."""
    if len(flags) != len(keys) or not all(isinstance(f, bool) for f in flags):
        raise AssertionError("%s answered %s for %d keys" % (route, flags, len(keys)))


def check_pages(route, pages, keys):
    """check_pages raises unless pages, an answer of route for keys that exist, holds a page for each."""
    if len(pages) != len(keys) or not all(isinstance(p, int) and p >= 0 for p in pages):
        raise AssertionError("%s answered %s for %s, which exist" % (route, pages, keys))


def read_turn(idle, keys, exists, locations):
    """read_turn is a reader's turn: it sits idle `idle` seconds, asks exists(keys) (a route and its flags), then locations(found) of the keys found (routes, their pages, and whether a relay that reached no server answered them as misses), each of which must give a page per key unless so answered."""
    time.sleep(idle)
    route, flags = exists(keys)
    check_flags(route, flags, keys)
    found = [k for k, f in zip(keys, flags) if f]
    for route, pages, unreached in locations(found) if found else []:
        if not unreached:
            check_pages(route, pages, found)
