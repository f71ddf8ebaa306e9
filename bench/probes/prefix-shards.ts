// Prefix-aware eviction on a cluster of shards, in process: the `prefix` workload's request stream
// (prefix-stream.ts) through shardRouter in front of S states, each a shard, against one state, and
// with `--eviction lru`; leading hits per request and evictions by kind. Each shard sees only its
// part of a chain: what the router sends it as each key's prefix key decides what its eviction
// reaches (chainPrefixes). `node --import tsx bench/probes/prefix-shards.ts [--shards=1,2,4]`
import { create } from "@bufbuild/protobuf";
import { AllocationStatus, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataState } from "../../src/core/state.js";
import type { MethodName, RequestOf, ResponseOf } from "../../src/service/metadata-calls.js";
import { localCalls, metadataService } from "../../src/service/metadata-service.js";
import { shardRouter } from "../../src/service/shard-router.js";
import { type PrefixConfig, prefixPages, requestStream } from "./prefix-stream.js";

const CONFIG: PrefixConfig = { seed: 1, prefixes: 300, zipf: 1, pagesPerPrefixBlock: 0.5, warmupRequests: 2_000, requests: 4_000 };

/** run drives the stream through S shards of one eviction policy, as prefix-stream.ts drives a server. */
async function run(shards: number, eviction: "prefix" | "lru"): Promise<string> {
  let nowMs = 1_000_000;
  const clock = () => nowMs;
  const states = Array.from({ length: shards }, (_, shard) => new MetadataState(clock, { shards, shard, eviction }, false));
  const router = shardRouter(states.map((state, shard) => localCalls(metadataService({ state }, `s${shard}`))));
  const call = async <M extends MethodName>(method: M, init: object): Promise<ResponseOf<M>> =>
    (await router(method, create(MetadataService.method[method].input, init as never) as RequestOf<M>)).response;
  const namespace = "prefix";
  await call("initializeRank", { namespace, rank: 0, numPages: prefixPages(CONFIG), worldSize: 1 });
  const stream = requestStream(CONFIG);
  let hits = 0;
  for (let i = 0; i < CONFIG.warmupRequests + CONFIG.requests; i++) {
    nowMs += 10;
    const chain = stream.next().value;
    const { exists } = await call("batchExists", { namespace, keys: chain });
    const hit = exists.indexOf(false) < 0 ? chain.length : exists.indexOf(false);
    if (i >= CONFIG.warmupRequests) hits += hit;
    if (hit > 0) await call("getLocations", { namespace, rank: 0, keys: chain.slice(0, hit) });
    if (hit === chain.length) continue;
    const keys = chain.slice(hit);
    const prefixKeys = keys.map((_, j) => (hit + j === 0 ? "" : chain[hit + j - 1]!));
    const { pages, statuses } = await call("batchAllocate", { namespace, rank: 0, keys, prefixKeys });
    const written = statuses.flatMap((status, j) => (status === AllocationStatus.NEW ? [j] : []));
    await call("confirmWrite", { namespace, rank: 0, keys: written.map((j) => keys[j]!), pages: written.map((j) => pages[j]!) });
  }
  const [stats] = (await call("getStats", { namespace })).namespaces;
  const { evictions, orphanEvictions, leafEvictions, lruEvictions } = stats!;
  return `S=${shards} --eviction ${eviction.padEnd(6)}: ${(hits / CONFIG.requests).toFixed(2)} leading hits per request; evictions ${evictions} (orphan ${orphanEvictions}, leaf ${leafEvictions}, lru ${lruEvictions})`;
}

const arg = process.argv.find((a) => a.startsWith("--shards="));
for (const shards of (arg?.slice("--shards=".length) ?? "1,2,4").split(",").map(Number)) {
  for (const eviction of ["prefix", "lru"] as const) console.log(await run(shards, eviction));
}
