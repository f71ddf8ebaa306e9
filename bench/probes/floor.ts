// floor.ts: the `floor` workload. Three servers get the same request bytes, in
// one run: a bare node:http2 server (bare-http2-server.ts), the floor (the real
// RPC stack with canned answers, floor-server.ts) and the real server holding
// the live keys. BatchExists and GetLocations of B present keys are replayed as
// they are by h2load; BatchAllocate and ConfirmWrite take fresh keys each call,
// so a lean client sends them (C calls in flight). Each row is the server's CPU
// per call, and its ratio to the bare server's.

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  BatchAllocateResponseSchema,
  BatchExistsRequestSchema,
  GetLocationsRequestSchema,
  InitializeRankRequestSchema,
  MetadataService,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { benchKey } from "../harness/keys.js";
import { LeanGrpc } from "../harness/lean-grpc.js";
import { nativeLoad } from "../harness/native-load.js";
import { cpuMs, SERVER, type ServerProcess, serverArgs, startProcess } from "../harness/processes.js";
import { batchAllocateFrame, confirmWriteFrame } from "../harness/request-frames.js";

const NAMESPACE = "floor";
/** Rank 0's pages: room for the live keys and every fresh key of the write rows. */
const NUM_PAGES = 1 << 21;
const path = (method: string) => `/${MetadataService.typeName}/${method}`;

/** FloorRow is one call type on one server. */
export interface FloorRow {
  server: "bare" | "floor" | "service";
  call: string;
  batch: number;
  callsPerSec: number;
  serverCpuPerCallUs: number;
}

export interface FloorOptions {
  batch: number;
  liveKeys: number;
  /** seconds of each measured window (after one of warm-up). */
  seconds: number;
  /** h2load's connections × streams, and the writers' calls in flight. */
  connections: number;
  streams: number;
}

/** measureFloor runs every call type on the three servers and returns the rows, bare first. */
export async function measureFloor(options: FloorOptions): Promise<FloorRow[]> {
  const rows: FloorRow[] = [];
  const servers: [FloorRow["server"], () => Promise<ServerProcess>][] = [
    ["bare", () => startProcess("bench/harness/bare-http2-server.ts", [String(options.batch)])],
    ["floor", () => startProcess("bench/harness/floor-server.ts", [])],
    ["service", () => startProcess(SERVER, serverArgs(["--in-memory"]))],
  ];
  const { exists, locations } = replayedRequests(options.batch);
  for (const [name, start] of servers) {
    const server = await start();
    try {
      await fill(server.url, options);
      for (const [call, message] of [
        ["BatchExists", exists],
        ["GetLocations", locations],
      ] as const) {
        const r = await nativeLoad(server.url, server.pid, call, message, {
          connections: options.connections,
          streams: options.streams,
          durationSec: options.seconds,
        });
        rows.push({ server: name, call, batch: options.batch, callsPerSec: r.callsPerSec, serverCpuPerCallUs: r.serverCpuPerCallUs });
      }
      rows.push(await writes(name, server, options));
    } finally {
      await server.stop();
    }
  }
  return rows;
}

/** replayedRequests are the BatchExists and GetLocations requests h2load replays: `batch` keys, all among the live keys. */
export function replayedRequests(batch: number): { exists: Uint8Array; locations: Uint8Array } {
  const present = Array.from({ length: batch }, (_, i) => benchKey(i * 389, 0xf1007));
  return {
    exists: toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { namespace: NAMESPACE, keys: present })),
    locations: toBinary(GetLocationsRequestSchema, create(GetLocationsRequestSchema, { namespace: NAMESPACE, rank: 0, keys: present })),
  };
}

/** fill initializes rank 0 and confirms the live keys, in calls of 512; the keys BatchExists asks for are among them. */
export async function fill(url: string, options: Pick<FloorOptions, "liveKeys">): Promise<void> {
  const client = new LeanGrpc(url);
  try {
    await client.call(
      path("InitializeRank"),
      toBinary(InitializeRankRequestSchema, create(InitializeRankRequestSchema, { namespace: NAMESPACE, rank: 0, numPages: NUM_PAGES })),
    );
    for (let at = 0; at < options.liveKeys; at += 512) {
      const keys = Array.from({ length: Math.min(512, options.liveKeys - at) }, (_, i) => benchKey(at + i, 0xf1007));
      await confirmFresh(client, keys);
    }
  } finally {
    client.close();
  }
}

/** confirmFresh allocates keys and confirms them on the pages they got. */
async function confirmFresh(client: LeanGrpc, keys: string[]): Promise<void> {
  const answer = fromBinary(BatchAllocateResponseSchema, await client.callFramed(path("BatchAllocate"), batchAllocateFrame(NAMESPACE, 0, keys, [])));
  await client.callFramed(path("ConfirmWrite"), confirmWriteFrame(NAMESPACE, 0, keys, answer.pages));
}

/**
 * writes sends BatchAllocate then ConfirmWrite of fresh keys from `streams`
 * writers on `connections` connections, a second of warm-up, then the
 * measured window; the row is per call (two per pair).
 */
async function writes(name: FloorRow["server"], server: ServerProcess, options: FloorOptions): Promise<FloorRow> {
  const clients = Array.from({ length: options.connections }, () => new LeanGrpc(server.url));
  let next = 0;
  let pairs = 0;
  let measuring = false;
  let stop = false;
  const writer = async (client: LeanGrpc) => {
    while (!stop) {
      const base = 1e8 + next++ * options.batch;
      await confirmFresh(
        client,
        Array.from({ length: options.batch }, (_, i) => benchKey(base + i, 0xf1007)),
      );
      if (measuring) pairs++;
    }
  };
  const writers = Array.from({ length: options.connections * options.streams }, (_, i) => writer(clients[i % clients.length]!));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  measuring = true;
  const startedAt = performance.now();
  const cpuBefore = cpuMs(server.pid);
  await new Promise((resolve) => setTimeout(resolve, options.seconds * 1_000));
  const serverCpuMs = cpuMs(server.pid) - cpuBefore;
  const elapsedMs = performance.now() - startedAt;
  measuring = false;
  stop = true;
  await Promise.all(writers);
  for (const client of clients) client.close();
  const calls = pairs * 2;
  return {
    server: name,
    call: "BatchAllocate+ConfirmWrite",
    batch: options.batch,
    callsPerSec: (calls / elapsedMs) * 1_000,
    serverCpuPerCallUs: (serverCpuMs * 1_000) / calls,
  };
}
