import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MetadataState } from "../../src/core/state.js";
import { keepShard } from "../../src/server/start.js";
import { LmdbStore, StoreOpenError } from "../../src/store/lmdb-store.js";
import { tempDir } from "../support/temp-dir.js";

/** openError opens dir and returns the refusal's message, failing the test when it opens. */
async function openError(dir: string): Promise<string> {
  const error = await LmdbStore.open(dir).then(
    (store) => store.close().then(() => undefined),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreOpenError);
  const message = (error as Error).message;
  expect(message).not.toContain("\n");
  return message;
}

describe("the data dir", () => {
  it.each([["hf3fs.data"], ["tmp.AbC123xy"], ["a.b.c"], ["plain"]])("may be named %s, new or existing and empty", async (name) => {
    for (const exists of [false, true]) {
      const dir = join(tempDir(), name);
      if (exists) mkdirSync(dir);
      const store = await LmdbStore.open(dir);
      const serverId = store.serverId;
      await store.close();
      const again = await LmdbStore.open(dir);
      expect(again.serverId).toBe(serverId);
      await again.close();
    }
  });

  it("refuses a file where the directory should be, naming it", async () => {
    const path = join(tempDir(), "not-a-dir");
    writeFileSync(path, "x");
    expect(await openError(path)).toBe(`data dir ${path} is not a directory`);
  });

  it("refuses a directory holding unrelated files, naming it and them", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "notes.txt"), "mine");
    expect(await openError(dir)).toBe(`data dir ${dir} holds files that are not an hf3fs-metadata store (notes.txt): use an empty or new directory`);
  });

  it("refuses a directory it cannot create, naming it", async () => {
    const parent = join(tempDir(), "file");
    writeFileSync(parent, "x");
    expect(await openError(join(parent, "data"))).toMatch(new RegExp(`^cannot create data dir ${parent}/data: `));
  });

  it("refuses an unwritable directory, naming it", async () => {
    const dir = tempDir();
    chmodSync(dir, 0o555);
    if (process.getuid?.() !== 0) {
      expect(await openError(dir)).toBe(`data dir ${dir} is not writable by this process`);
      return;
    }
    // root may write anywhere: run the check as root without the capabilities that override file permissions. (Not as
    // "nobody": a checkout under a directory only root may enter, such as /root on Debian, is out of nobody's reach.)
    const tmp = tempDir();
    chmodSync(tmp, 0o777);
    const probe = `import("${new URL("../../src/store/lmdb-store.ts", import.meta.url).pathname}").then((m) => m.LmdbStore.open(process.argv[1])).then(() => console.log("opened"), (e) => console.log(e.message))`;
    const unprivileged = ["--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"];
    const child = spawnSync("setpriv", [...unprivileged, process.execPath, "--import", "tsx", "-e", probe, dir], {
      encoding: "utf8",
      cwd: new URL("../..", import.meta.url).pathname,
      env: { ...process.env, TMPDIR: tmp },
    });
    expect(child.stdout.trim()).toBe(`data dir ${dir} is not writable by this process`);
  });
});

describe("a single node's data dir of a shard (--shards, --shard)", () => {
  it("keeps the shard it was made for and refuses another, naming both; an empty one takes any", async () => {
    const dir = tempDir();
    const store = await LmdbStore.open(dir);
    await keepShard(store, 1, 3); // empty: takes any, and records it
    await keepShard(store, 0, 2);
    const state = new MetadataState(() => 0, { shards: 2, shard: 0 });
    state.initializeRank("kv", 0, 8, 1);
    await store.commit(state.takeChanges());
    await store.close();
    const again = await LmdbStore.open(dir);
    await keepShard(again, 0, 2);
    await expect(keepShard(again, 1, 2)).rejects.toThrow(
      `the data dir ${dir} holds shard 0 of 2, not shard 1 of 2: start it with the --shard and --shards it was made with`,
    );
    await expect(keepShard(again, 0, 1)).rejects.toThrow(/holds shard 0 of 2, not shard 0 of 1/);
    await again.close();
  });
});
