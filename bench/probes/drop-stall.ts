// drop-stall.ts [--keys=N] [--rounds=R] [--roots=A,B]: what the DropRank of one rank of several costs a
// single node's event loop, in process (the core and the LMDB store, no network). A state with N keys
// (100,000) confirmed on ranks 0 and 1 of namespace "big", committed; then DropRank of rank 1 and its
// commit, while a 1 ms timer runs. It prints how many changes the drop journaled, the core's time (one
// event turn), the commit's time, and the longest gap of the timer from the call to the commit's end.
// `--roots` names checkouts to alternate (A against B, bench/README.md): another worktree, such as
// `../old`, measures the code before a change. Each round runs in a child process of its own.
// Run: node --import tsx bench/probes/drop-stall.ts
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { option } from "../harness/options.js";

const KEYS = Number(option("keys", "100000"));
const rounds = Number(option("rounds", "2"));
const here = resolve(new URL("../..", import.meta.url).pathname);
const roots = option("roots", here)
  .split(",")
  .map((root) => resolve(root));
const child = option("child", "");

if (child !== "") {
  const { MetadataState } = (await import(join(child, "src/core/state.ts"))) as typeof import("../../src/core/state.js");
  const { LmdbStore } = (await import(join(child, "src/store/lmdb-store.ts"))) as typeof import("../../src/store/lmdb-store.js");
  const dir = mkdtempSync(join(tmpdir(), "drop-stall-"));
  try {
    const store = await LmdbStore.open(dir);
    const state = new MetadataState(() => performance.now(), { incompleteTtlMs: 3_600_000 });
    for (const rank of [0, 1]) state.initializeRank("big", rank, KEYS + 10, 0);
    for (let at = 0; at < KEYS; at += 4_096) {
      const keys = Array.from({ length: Math.min(4_096, KEYS - at) }, (_, i) => `key-${at + i}`);
      for (const rank of [0, 1]) state.confirmWrite("big", rank, keys, state.batchAllocate("big", rank, keys).pages);
      await store.commit(state.takeChanges());
    }
    let longestGapMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 1);
    await new Promise((done) => setTimeout(done, 50));
    const started = performance.now();
    last = started;
    state.dropRank("big", 1);
    const changes = state.takeChanges();
    const coreMs = performance.now() - started;
    await store.commit(changes);
    const commitMs = performance.now() - started - coreMs;
    const now = performance.now();
    longestGapMs = Math.max(longestGapMs, now - last);
    clearInterval(timer);
    await store.close();
    console.log(JSON.stringify({ changes: changes.length, coreMs, commitMs, longestGapMs }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  for (let round = 1; round <= rounds; round++) {
    for (const root of roots) {
      const out = execFileSync(process.execPath, ["--import", "tsx", new URL(import.meta.url).pathname, `--child=${root}`, `--keys=${KEYS}`], {
        encoding: "utf8",
      });
      const r = JSON.parse(out.trim().split("\n").at(-1)!) as { changes: number; coreMs: number; commitMs: number; longestGapMs: number };
      console.log(
        `round ${round} ${root}: DropRank of rank 1 of 2, ${KEYS.toLocaleString("en-US")} keys: ${r.changes} changes; core ${r.coreMs.toFixed(0)} ms, commit ${r.commitMs.toFixed(0)} ms, longest timer gap ${r.longestGapMs.toFixed(0)} ms`,
      );
    }
  }
}
