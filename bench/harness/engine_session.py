"""What every test client that stands for vLLM's or SGLang's HF3FS
connector shares: its requests Session, with the retry policy both
connectors give it (urllib3 Retry(total=3, backoff_factor=0.3,
status_forcelist=[500, 502, 503, 504], allowed_methods=["GET", "POST"]):
about 1.8 s of retries in all) and no retry of its own, and its loop until
the test stops it (closes its stdin)."""
import json
import sys
import threading

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def engine_session():
    """engine_session is a keep-alive Session that retries as vLLM's and SGLang's clients do."""
    session = requests.Session()
    retry = Retry(total=3, backoff_factor=0.3, status_forcelist=[500, 502, 503, 504], allowed_methods=["GET", "POST"])
    session.mount("http://", HTTPAdapter(max_retries=retry))
    return session


def stopped_when_stdin_closes():
    """stopped_when_stdin_closes is an Event set once the test closes this process's stdin."""
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    return stopped


def loop(step, errors, every=1):
    """loop calls step(i) until stdin closes, counting each failure in errors and printing {"steps": N} every `every` turns; it returns N."""
    stopped = stopped_when_stdin_closes()
    i = 0
    while not stopped.is_set():
        try:
            step(i)
        except Exception as error:  # every failure is what the test counts
            errors.append("%s: %s" % (type(error).__name__, str(error)[:300]))
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
