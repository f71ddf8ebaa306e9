#!/usr/bin/python3
"""One process of a vLLM engine as its HF3FS connector talks to the server:
the vLLM JSON routes over its own requests Session (keep-alive), with
vLLM's retry policy (urllib3 Retry(total=3, backoff_factor=0.3,
status_forcelist=[500, 502, 503, 504], allowed_methods=["GET", "POST"]))
and no retry of its own.

A `worker RANK` is one tensor-parallel worker: it initializes its rank,
then allocates and confirms one key after another on it (engine-0,
engine-1, ...: every worker writes the same keys, each on its own rank).
The `scheduler` asks BatchExists of the keys written lately every
IDLE_SECONDS, then GetLocations on each of the RANKS ranks of those that
exist (as the workers do to load a hit: a key complete on every rank must
have a page on each), and between its turns its connection sits idle, as
vLLM's scheduler's does while the workers write.

Both loop until stdin closes, printing {"steps": N} after each turn, then
print one JSON line: calls made, errors (a call that failed after its
retries, or a wrong answer), the longest call, and the keys confirmed (a worker) or the
number of turns (the scheduler).

usage: vllm_engine.py URL worker RANK NUM_PAGES
       vllm_engine.py URL scheduler IDLE_SECONDS RANKS
"""
import sys

from engine_session import Calls, initialize_then_loop, loop, read_turn, recent_keys, write_key

url, role = sys.argv[1], sys.argv[2]

calls = Calls()


def post(path, body):
    """post sends one call, as vLLM's client does (requests' json=), and returns its JSON answer."""
    return calls.post(url + path, json=body)


if role == "worker":
    rank, num_pages = int(sys.argv[3]), int(sys.argv[4])
    confirmed = []

    def write(i):
        key = "engine-%d" % i
        write_key(post, rank, key)
        confirmed.append(key)

    initialize_then_loop(calls.errors, lambda: post("/rank/%d/initialize" % rank, {"num_pages": num_pages, "role": "worker"}), write)
    calls.report(confirmed=confirmed)
else:
    idle, ranks = float(sys.argv[3]), int(sys.argv[4])

    def ask(i):
        read_turn(
            idle,
            recent_keys("engine", i),
            lambda keys: ("batch_exists", post("/keys/batch_exists", {"keys": keys})["exists"]),
            lambda found: [
                ("get_locations on rank %d" % r, post("/keys/get_locations", {"rank": r, "keys": found})["locations"], calls.last_unreached) for r in range(ranks)
            ],
        )

    calls.report(turns=loop(ask, calls.errors))
