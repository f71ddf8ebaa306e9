// protobuf-probe.ts: what protobuf-es costs per key on this machine, to
// decode a BatchAllocateRequest of 512 keys (and 512 prefix keys) of 64
// characters, and to encode its answer. Run: node --import tsx bench/protobuf-probe.ts
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BatchAllocateRequestSchema, BatchAllocateResponseSchema } from "../gen/hf3fs/metadata/v1/metadata_pb.js";
import { benchKey } from "./keys.js";

const keys = Array.from({ length: 512 }, (_, i) => benchKey(i, 7));
const request = toBinary(BatchAllocateRequestSchema, create(BatchAllocateRequestSchema, { namespace: "kv", rank: 0, keys, prefixKeys: keys }));
const response = create(BatchAllocateResponseSchema, { pages: keys.map((_, i) => i), statuses: keys.map(() => 1) });
const ROUNDS = 2_000;
for (let pass = 0; pass < 3; pass++) {
  let started = performance.now();
  for (let i = 0; i < ROUNDS; i++) fromBinary(BatchAllocateRequestSchema, request);
  const decodeNs = ((performance.now() - started) / ROUNDS / (2 * keys.length)) * 1e6;
  started = performance.now();
  for (let i = 0; i < ROUNDS; i++) toBinary(BatchAllocateResponseSchema, response);
  const encodeNs = ((performance.now() - started) / ROUNDS / keys.length) * 1e6;
  console.log(`pass ${pass}: decode ${decodeNs.toFixed(0)} ns per key string, encode ${encodeNs.toFixed(0)} ns per (page, status)`);
}
