// native-load.ts: drives one read-only RPC with h2load (Debian's
// nghttp2-client), a native HTTP/2 load tool, posting one pre-encoded gRPC
// request again and again. A Node client fills its core before the server
// at B=1; h2load costs a fraction of the server's CPU per call, so this
// shows the server's own ceiling for small calls.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { grpcFrame, LeanGrpc } from "./lean-grpc.js";
import { cpuMs } from "./processes.js";

/** NativeLoadResult is one h2load run against a server process. */
export interface NativeLoadResult {
  calls: number;
  callsPerSec: number;
  serverCpuPct: number;
  clientCpuPct: number;
  serverCpuPerCallUs: number;
}

/** h2loadInstalled tells whether h2load is on PATH. */
export function h2loadInstalled(): boolean {
  return spawnSync("h2load", ["--version"], { stdio: "ignore" }).status === 0;
}

/**
 * nativeLoad posts `message` to `method` for a second of warm-up, then
 * durationSec, over `connections` connections of `streams` calls in flight
 * each. Calls, calls/s and the server's CPU cover h2load's measured window.
 * h2load only sees HTTP 200, which gRPC errors have too, so the same bytes
 * are first sent once through the lean client, which requires grpc-status 0,
 * and when the server has /metrics, the run fails unless every call of
 * `method` in it answered OK (or was canceled by h2load's own end, at most
 * the calls in flight).
 */
export async function nativeLoad(
  url: string,
  serverPid: number,
  method: string,
  message: Uint8Array,
  options: { connections: number; streams: number; durationSec: number },
): Promise<NativeLoadResult> {
  const path = `/${MetadataService.typeName}/${method}`;
  const frame = grpcFrame(message);
  const lean = new LeanGrpc(url);
  await lean.callFramed(path, frame).finally(() => lean.close());
  const dir = mkdtempSync(join(tmpdir(), "hf3fs-native-load-"));
  const body = join(dir, "request.bin");
  writeFileSync(body, frame);
  const before = await callsByCode(url, method);
  const args = ["--warm-up-time=1", "-D", String(options.durationSec), "-c", String(options.connections), "-m", String(options.streams), "-t", "1"];
  const child = spawn("h2load", [...args, "-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers", `${url}${path}`], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  // The server's and h2load's CPU, read when h2load says its measured window starts and ends.
  const window = { started: 0, serverCpuMs: 0, clientCpuMs: 0, elapsedMs: 0 };
  let output = "";
  createInterface({ input: child.stdout! }).on("line", (line) => {
    output += `${line}\n`;
    if (line.startsWith("Main benchmark duration is started")) {
      window.started = performance.now();
      window.serverCpuMs = -cpuMs(serverPid);
      window.clientCpuMs = -cpuMs(child.pid!);
    } else if (line.startsWith("Main benchmark duration is over")) {
      window.elapsedMs = performance.now() - window.started;
      window.serverCpuMs += cpuMs(serverPid);
      window.clientCpuMs += cpuMs(child.pid!);
    }
  });
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
  const done = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded/.exec(output);
  if (code !== 0 || done === null) throw new Error(`h2load exited with ${code}:\n${output}`);
  // Lines that came late (buffered) would make a window of the wrong length.
  if (Math.abs(window.elapsedMs - options.durationSec * 1_000) > 250)
    throw new Error(`h2load's measured window lasted ${window.elapsedMs} ms, not ${options.durationSec} s`);
  const after = await callsByCode(url, method);
  if (after !== undefined && before !== undefined) {
    // h2load resets the calls still in flight when its time is up: those, and only as many, may end "canceled".
    const inFlight = options.connections * options.streams;
    const failed = [...after]
      .map(([c, n]) => [c, n - (before.get(c) ?? 0)] as const)
      .filter(([c, n]) => c !== "ok" && n > 0 && !(c === "canceled" && n <= inFlight));
    if (failed.length > 0) throw new Error(`h2load: calls of ${method} failed: ${JSON.stringify(failed)}`);
  }
  const calls = Number(done[2]);
  return {
    calls,
    callsPerSec: (calls / window.elapsedMs) * 1_000,
    serverCpuPct: (window.serverCpuMs / window.elapsedMs) * 100,
    clientCpuPct: (window.clientCpuMs / window.elapsedMs) * 100,
    serverCpuPerCallUs: (window.serverCpuMs * 1_000) / calls,
  };
}

/** callsByCode reads hf3fs_metadata_calls_total of one method from the server's /metrics, by code; undefined without /metrics. */
async function callsByCode(url: string, method: string): Promise<Map<string, number> | undefined> {
  // A bare HTTP/2 server (bare-http2-server.ts) does not speak HTTP/1.1 at all: no /metrics either.
  const response = await fetch(`${url}/metrics`).catch(() => undefined);
  if (response?.status !== 200) return undefined;
  const text = await response.text();
  const counts = new Map<string, number>();
  for (const match of text.matchAll(/^hf3fs_metadata_calls_total\{([^}]*)\} (\d+)/gm)) {
    const labels = Object.fromEntries([...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (labels.method === method) counts.set(labels.code!, Number(match[2]));
  }
  return counts;
}
