#!/usr/bin/python3
"""One tensor-parallel rank of an SGLang engine as its HF3FS storage talks
to the server: SGLang's per-rank routes (POST /{rank}/...), every body
naming its namespace, over a requests Session (keep-alive) that retries
with SGLang's policy, the same as vLLM's (engine_session.py), and no retry
of its own.

Both roles first initialize the rank with NUM_PAGES, as the rank's
storage does before its threads start (SGLang's routes answer 404 for a
rank not initialized). A `writer` is the rank's backup thread: it stores
one page after another (sg-0, sg-1, ..., each with the one before as its
prefix): reserve_and_allocate_page_indices, then confirm_write unless the
server said the key was written. A `prefetcher` is the rank's prefetch
thread, on a connection of its own that sits idle between its calls: every
IDLE_SECONDS it asks `exists` of the pages written lately, then
get_page_indices of those that exist, each of which must have a page (so
NUM_PAGES must be more than a run writes: a page evicted between the two
calls would count as an error).

Both loop until stdin closes, printing {"steps": N} after each turn, then
print one JSON line: calls made, errors (a call that failed after its
retries, or a wrong answer), the longest call, and the keys confirmed (a writer) or the
number of turns (a prefetcher).

usage: sglang_engine.py URL writer RANK NUM_PAGES
       sglang_engine.py URL prefetcher RANK NUM_PAGES IDLE_SECONDS
"""
import json
import sys

from engine_session import Calls, initialize_then_loop, read_turn, recent_keys

NAMESPACE = "kv"

url, role, rank, num_pages = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

calls = Calls()


def post(route, body):
    """post sends one call to the rank's route as SGLang's client does (JSON bytes, its Content-Type, the namespace) and returns its JSON answer."""
    return calls.post("%s/%d/%s" % (url, rank, route), data=json.dumps(dict(body, namespace=NAMESPACE)), headers={"Content-Type": "application/json"})


def initialize():
    """initialize is the rank's storage's first call: its rank, with its pages."""
    post("initialize", {"num_pages": num_pages})


if role == "writer":
    confirmed = []

    def store(i):
        key, prefix = "sg-%d" % i, ("sg-%d" % (i - 1) if i > 0 else None)
        indices = post("reserve_and_allocate_page_indices", {"keys": [[key, prefix]]})["indices"]
        if len(indices) != 1 or not isinstance(indices[0][0], bool) or not isinstance(indices[0][1], int) or indices[0][1] < 0:
            raise AssertionError("reserve_and_allocate_page_indices answered %s" % indices)
        written, page = indices[0]
        if not written:
            post("confirm_write", {"written_keys_to_confirm": [[key, page]], "pages_to_release": []})
        confirmed.append(key)

    initialize_then_loop(calls.errors, initialize, store)
    calls.report(confirmed=confirmed)
else:
    idle = float(sys.argv[5])

    def prefetch(i):
        read_turn(
            idle,
            recent_keys("sg", i),
            lambda keys: ("exists", post("exists", {"keys": keys})["exists"]),
            lambda found: [("get_page_indices", post("get_page_indices", {"keys": found})["indices"], calls.last_unreached)],
        )

    calls.report(turns=initialize_then_loop(calls.errors, initialize, prefetch))
