#!/usr/bin/python3
"""A worker that talks to the server as vLLM's HF3FS client does: the vLLM
JSON routes, over a requests Session that retries with vLLM's policy
(urllib3 Retry(total=3, backoff_factor=0.3, status_forcelist=[500, 502, 503,
504], allowed_methods=["GET", "POST"]): about 1.8 s of retries in all), and
no other retry of its own.

It stands for the RANKS workers of one engine (one per tensor-parallel
rank): it initializes them, then loops until its stdin closes: BatchExists
of a key the store held before it started and of the keys it confirmed
last, then BatchAllocate and ConfirmWrite of one new key on every rank.
Every answer is checked (but misses a relay answered for want of a
server, which say nothing); every 5 turns it prints {"steps": N}.
At the end it asks whether every key it confirmed still exists, and prints
one JSON line: calls made, errors (a call that failed after its retries, or
a wrong answer), keys lost, and the longest call in seconds (retries and any
wait at the server included).

usage: vllm_policy_client.py URL RANKS NUM_PAGES KNOWN_KEYS (0: no store was filled)
"""
import sys
import time

from engine_session import Calls, loop, write_key

url, ranks, num_pages, known = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

calls = Calls()
confirmed = []


def post(path, body):
    """post sends one call, as vLLM's client does (requests' json=), and returns its JSON answer."""
    return calls.post(url + path, json=body)


def bench_key(i):
    """bench_key is the i-th key of the test's store (bench/harness/keys.ts)."""
    return "%08x%056x" % (0, i)


def step(i):
    """step is one turn of the loop; it raises on a failed call or a wrong answer."""
    keys = ([bench_key((i * 7919) % known)] if known > 0 else []) + confirmed[-8:]
    exists = post("/keys/batch_exists", {"keys": keys})["exists"]
    if not all(exists) and not calls.last_unreached:
        raise AssertionError("batch_exists answered %s for %s" % (exists, keys))
    key = "worker-%d" % i
    for rank in range(ranks):
        write_key(post, rank, key)
    confirmed.append(key)


for rank in range(ranks):
    post("/rank/%d/initialize" % rank, {"num_pages": num_pages, "role": "worker"})
loop(step, calls.errors, every=5)

exists = post("/keys/batch_exists", {"keys": confirmed})["exists"] if confirmed else []
# Misses from a relay that reached no server say nothing of what was kept: ask again, for up to 10 s.
for _ in range(100):
    if not (confirmed and calls.last_unreached):
        break
    time.sleep(0.1)
    exists = post("/keys/batch_exists", {"keys": confirmed})["exists"]
calls.report(confirmed=len(confirmed), lost=exists.count(False))
