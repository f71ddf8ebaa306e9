// protobuf-probe.ts: what decoding a BatchAllocateRequest of 512 keys (and
// 512 prefix keys) of 64 characters, and encoding its answer, costs per key
// on this machine: protobuf-es's reflective codec against the hand-written
// one of the gRPC fast path (src/framing/grpc/batch-codecs.ts); then what a relay pays to send
// such a request on (decoded, then encoded by src/client/flat-encoder.ts): its keys made strings
// and encoded again, against its keys copied as the bytes they came as.
// Run: node --import tsx bench/probes/protobuf-probe.ts
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { AllocationStatus, BatchAllocateRequestSchema, BatchAllocateResponseSchema } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { encodeFramed } from "../../src/client/flat-encoder.js";
import { BATCH_CODECS } from "../../src/framing/grpc/batch-codecs.js";
import { benchKey } from "../harness/keys.js";

const keys = Array.from({ length: 512 }, (_, i) => benchKey(i, 7));
const request = Buffer.from(toBinary(BatchAllocateRequestSchema, create(BatchAllocateRequestSchema, { namespace: "kv", rank: 0, keys, prefixKeys: keys })));
const response = { pages: keys.map((_, i) => i * 97), statuses: keys.map(() => AllocationStatus.NEW) };
const codec = BATCH_CODECS.BatchAllocate!;
const ROUNDS = 2_000;

/** nsPer runs fn ROUNDS times and returns the time per unit, in ns. */
function nsPer(units: number, fn: () => unknown): number {
  const started = performance.now();
  for (let i = 0; i < ROUNDS; i++) fn();
  return ((performance.now() - started) / ROUNDS / units) * 1e6;
}

for (let pass = 0; pass < 3; pass++) {
  const decodeReflective = nsPer(2 * keys.length, () => fromBinary(BatchAllocateRequestSchema, request));
  const decodeHand = nsPer(2 * keys.length, () => codec.decode(request, Number.MAX_SAFE_INTEGER));
  const encodeReflective = nsPer(keys.length, () => toBinary(BatchAllocateResponseSchema, create(BatchAllocateResponseSchema, response)));
  const encodeHand = nsPer(keys.length, () => codec.encode(response));
  console.log(
    `pass ${pass}: decode ${decodeReflective.toFixed(0)} ns (protobuf-es) / ${decodeHand.toFixed(0)} ns (batch codec) per key string; ` +
      `encode ${encodeReflective.toFixed(0)} / ${encodeHand.toFixed(0)} ns per (page, status)`,
  );
}

// A relay's hop: the request decoded, then encoded for its upstream (both key fields).
type Decoded = { namespace: string; rank: number; keys: string[]; prefixKeys: string[] };
const hopAsStrings = () => {
  const m = codec.decode(request, Number.MAX_SAFE_INTEGER) as Decoded;
  return encodeFramed(
    BatchAllocateRequestSchema,
    create(BatchAllocateRequestSchema, { namespace: m.namespace, rank: m.rank, keys: m.keys, prefixKeys: m.prefixKeys }),
  );
};
const hopAsBytes = () => encodeFramed(BatchAllocateRequestSchema, codec.decode(request, Number.MAX_SAFE_INTEGER) as never);
for (let pass = 0; pass < 3; pass++) {
  const strings = nsPer(2 * keys.length, hopAsStrings);
  const bytes = nsPer(2 * keys.length, hopAsBytes);
  console.log(`pass ${pass}: a relay's decode and encode ${strings.toFixed(0)} ns (keys as strings) / ${bytes.toFixed(0)} ns (keys as bytes) per key string`);
}
