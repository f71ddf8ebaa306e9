// The `prefix` workload: requests that share prefixes, as an inference engine's prompts do. Each
// request is one of a few hundred shared prefixes (Zipf popularity) followed by a suffix of its own,
// 8 to 64 blocks in all; the rank holds a fraction of what the stream writes. Per request, as vLLM's
// connector does: BatchExists of the whole chain (the leading run of hits is what a reader can use),
// GetLocations of those hits (the read), BatchAllocate of the rest with each block's prefix key, and
// ConfirmWrite of the new pages. The stream is a function of its seed, so two servers (one per
// eviction policy) see the same requests.
import { createHash } from "node:crypto";
import { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { cpuMs } from "../harness/processes.js";
import { seededRandom } from "../harness/random.js";

/** PrefixConfig shapes the stream. */
export interface PrefixConfig {
  seed: number;
  /** prefixes is the number of shared prefixes, of 4 to 32 blocks each; suffixes are 4 to 32 blocks. */
  prefixes: number;
  /** zipf is the exponent of the prefixes' popularity (rank r is drawn with weight 1 / r^zipf). */
  zipf: number;
  /** pagesPerPrefixBlock sizes the rank: this fraction of the blocks of all shared prefixes. */
  pagesPerPrefixBlock: number;
  warmupRequests: number;
  requests: number;
}

/** PrefixResult is what one server did with the stream's measured requests. */
export interface PrefixResult {
  numPages: number;
  requests: number;
  /** leadingHits is the mean number of blocks per request a prefix match found: what a reader can use. */
  leadingHits: number;
  /** leadingHitRate is leadingHits over the mean blocks of a request. */
  leadingHitRate: number;
  /** reachable is the fraction of the stored keys at the end whose every ancestor is stored too. */
  reachable: number;
  /** serverCpuPerBlockUs is the server's CPU per block of a request, over the measured requests. */
  serverCpuPerBlockUs: number;
  evictions: Record<string, number>;
}

/** blockKey is a block's key as engines make them: 64 hex characters. */
function blockKey(name: string): string {
  return createHash("sha256").update(name).digest("hex");
}

/** requestStream yields each request's chain of block keys. */
export function* requestStream(config: PrefixConfig): Generator<string[], never> {
  const random = seededRandom(config.seed);
  const lengths = Array.from({ length: config.prefixes }, () => 4 + Math.floor(random() * 29));
  const prefixes = lengths.map((length, p) => Array.from({ length }, (_, j) => blockKey(`prefix ${p} block ${j}`)));
  const weights = prefixes.map((_, r) => 1 / (r + 1) ** config.zipf);
  const total = weights.reduce((a, b) => a + b, 0);
  for (let request = 0; ; request++) {
    let pick = random() * total;
    let p = 0;
    while (pick > weights[p]! && p < prefixes.length - 1) pick -= weights[p++]!;
    const suffix = 4 + Math.floor(random() * 29);
    yield [...prefixes[p]!, ...Array.from({ length: suffix }, (_, j) => blockKey(`request ${request} block ${j}`))];
  }
}

/** prefixPages is the rank size of a config: its fraction of all shared prefix blocks. */
export function prefixPages(config: PrefixConfig): number {
  const random = seededRandom(config.seed);
  let blocks = 0;
  for (let p = 0; p < config.prefixes; p++) blocks += 4 + Math.floor(random() * 29);
  return Math.round(blocks * config.pagesPerPrefixBlock);
}

/** runPrefixStream drives the stream against the server at url (process pid), on rank 0 of namespace "prefix". */
export async function runPrefixStream(url: string, pid: number, config: PrefixConfig): Promise<PrefixResult> {
  const client = createMetadataClient({ baseUrl: url, protocol: "grpc", httpVersion: "2" });
  const namespace = "prefix";
  const numPages = prefixPages(config);
  await client.initializeRank({ namespace, rank: 0, numPages, worldSize: 1 });
  const parents = new Map<string, string>(); // every key written, with its parent, in write order
  let hits = 0;
  let blocks = 0;
  let cpuStart = 0;
  const stream = requestStream(config);
  for (let i = 0; i < config.warmupRequests + config.requests; i++) {
    if (i === config.warmupRequests) cpuStart = cpuMs(pid);
    const chain = stream.next().value;
    const { exists } = await client.batchExists({ namespace, keys: chain });
    const hit = exists.indexOf(false) < 0 ? chain.length : exists.indexOf(false);
    if (i >= config.warmupRequests) {
      hits += hit;
      blocks += chain.length;
    }
    if (hit > 0) await client.getLocations({ namespace, rank: 0, keys: chain.slice(0, hit) });
    if (hit === chain.length) continue;
    const keys = chain.slice(hit);
    const prefixKeys = keys.map((_, j) => (hit + j === 0 ? "" : chain[hit + j - 1]!));
    const { pages, statuses } = await client.batchAllocate({ namespace, rank: 0, keys, prefixKeys });
    const written = statuses.flatMap((status, j) => (status === AllocationStatus.NEW ? [j] : []));
    for (const j of written) parents.set(keys[j]!, prefixKeys[j]!);
    await client.confirmWrite({ namespace, rank: 0, keys: written.map((j) => keys[j]!), pages: written.map((j) => pages[j]!) });
  }
  const serverCpuMs = cpuMs(pid) - cpuStart;
  const [stats] = (await client.getStats({ namespace })).namespaces;
  return {
    numPages,
    requests: config.requests,
    leadingHits: hits / config.requests,
    leadingHitRate: hits / blocks,
    reachable: await reachableFraction(client, namespace, parents),
    serverCpuPerBlockUs: (serverCpuMs * 1_000) / blocks,
    evictions: {
      total: Number(stats!.evictions),
      orphan: Number(stats!.orphanEvictions),
      leaf: Number(stats!.leafEvictions),
      lru: Number(stats!.lruEvictions),
      inline: Number(stats!.inlineEvictions),
    },
  };
}

/** reachableFraction is the share of the stored keys whose parent chain is stored whole (parents are written before their children). */
async function reachableFraction(client: ReturnType<typeof createMetadataClient>, namespace: string, parents: Map<string, string>): Promise<number> {
  const keys = [...parents.keys()];
  const stored = new Set<string>();
  for (let at = 0; at < keys.length; at += 10_000) {
    const batch = keys.slice(at, at + 10_000);
    const { exists } = await client.batchExists({ namespace, keys: batch });
    for (const [i, key] of batch.entries()) if (exists[i]) stored.add(key);
  }
  const reachable = new Set<string>();
  for (const key of keys) {
    const parent = parents.get(key)!;
    if (stored.has(key) && (parent === "" || reachable.has(parent))) reachable.add(key);
  }
  return stored.size === 0 ? 1 : reachable.size / stored.size;
}
