import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchExistsRequestSchema, BatchExistsResponseSchema } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { makeNodeBase } from "../support/container-base.js";
import { lacking } from "../support/debian-packages.js";

// The image of deploy/container/Containerfile, built and run with podman. No container registry is
// reachable here, so the base is made from Debian's mirror (debootstrap) with this machine's Node.
// podman 4.3 on Debian 12: crun fails on hybrid cgroups (runc works), and its default ulimits are refused.
const ROOT = new URL("../../", import.meta.url).pathname;
const skip = lacking("the container image test", "podman", "debootstrap", "grpcio") || asRoot("the container image test");
const id = `${process.pid}-${Date.now()}`;
const BASE = `localhost/hf3fs-metadata-test-base:${id}`;
const IMAGE = `localhost/hf3fs-metadata-test:${id}`;
const RUN = ["--runtime", "runc", "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"];
const UID = 10001; // the image's user
const work = mkdtempSync(join(tmpdir(), "hf3fs-metadata-image-"));
const containers: string[] = [];

/** asRoot is "" when this process is root, which debootstrap and podman's port mappings need; else it skips as lacking does (and fails under CI). */
function asRoot(what: string): string {
  if (process.getuid?.() === 0) return "";
  if (process.env.CI === "true") throw new Error(`CI must run ${what} but is not root`);
  console.warn(`skipping ${what}: needs root (debootstrap, podman's rootful networking)`);
  return "not root";
}

/** podman runs podman and returns its stdout; it throws with podman's stderr when podman fails. */
function podman(...args: string[]): string {
  const run = spawnSync("podman", args, { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`podman ${args.join(" ")}: exit ${run.status}: ${run.stderr}`);
  return run.stdout.trim();
}

/** start runs the image detached as `name` with `args` after the image's name, and returns the name. */
function start(name: string, options: string[], args: string[] = []): string {
  containers.push(name);
  podman("run", "-d", "--name", name, ...RUN, ...options, IMAGE, ...args);
  return name;
}

/** logged waits until the container has logged a line with this msg, and returns that line. */
async function logged(name: string, msg: string): Promise<{ url?: string }> {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 100))) {
    const line = spawnSync("podman", ["logs", name], { encoding: "utf8" })
      .stdout.split("\n")
      .find((l) => l.includes(`"msg":"${msg}"`));
    if (line !== undefined) return JSON.parse(line) as { url?: string };
  }
  throw new Error(`${name} did not log "${msg}": ${spawnSync("podman", ["logs", name], { encoding: "utf8" }).stderr}`);
}

/** stop sends SIGTERM (podman stop, SIGKILL only after 30 s) and returns the exit code and the log. */
function stop(name: string): { code: number; log: string } {
  podman("stop", "--time", "30", name);
  return { code: Number(podman("inspect", name, "--format", "{{.State.ExitCode}}")), log: podman("logs", name) };
}

/** vllm posts a vLLM JSON route and returns its status and parsed body. */
async function vllm(url: string, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
}

/** grpcioExists asks BatchExists through Python's grpcio (Debian's python3-grpcio), the request and answer as protobuf bytes. */
function grpcioExists(target: string, keys: string[]): boolean[] {
  const request = Buffer.from(toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys }))).toString("hex");
  const script = `import sys, grpc
call = grpc.insecure_channel(sys.argv[1]).unary_unary("/hf3fs.metadata.v1.MetadataService/BatchExists")
sys.stdout.write(call(bytes.fromhex(sys.argv[2]), timeout=10).hex())`;
  const reply = execFileSync("/usr/bin/python3", ["-c", script, target, request], { encoding: "utf8" });
  return fromBinary(BatchExistsResponseSchema, Buffer.from(reply, "hex")).exists;
}

beforeAll(() => {
  if (skip !== "") return;
  makeNodeBase(BASE, work);
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  // Builds reach the npm registry as this machine's npm does: with its CA bundle, if it has one of its own.
  const trust = ca === undefined ? [] : ["-v", `${dirname(ca)}:${dirname(ca)}:ro`, "--build-arg", `NODE_EXTRA_CA_CERTS=${ca}`];
  podman(
    "build",
    "--layers=false",
    "--format",
    "docker",
    "--network",
    "host",
    ...RUN,
    ...trust,
    "--build-arg",
    `BASE=${BASE}`,
    "-f",
    "deploy/container/Containerfile",
    "-t",
    IMAGE,
    ROOT,
  );
}, 600_000);

afterAll(() => {
  for (const name of containers) spawnSync("podman", ["rm", "-f", name]);
  spawnSync("podman", ["rmi", "-f", IMAGE, BASE]);
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(skip !== "")("the container image", () => {
  it("serves gRPC (Python grpcio) and vLLM's JSON routes, is healthy, drains on SIGTERM with exit 0, and keeps its state on its volume", async () => {
    const data = mkdtempSync(join(work, "data-"));
    chownSync(data, UID, UID);
    const serve = start(`hf3fs-serve-${id}`, ["-p", "127.0.0.1::18000", "-v", `${data}:/var/lib/hf3fs-metadata`]);
    await logged(serve, "ready");
    const address = podman("port", serve, "18000/tcp"); // 127.0.0.1:PORT
    const url = `http://${address}`;
    expect(await vllm(url, "/rank/0/initialize", { num_pages: 16 })).toMatchObject({ status: 200 });
    const allocated = await vllm(url, "/keys/batch_allocate", { rank: 0, keys: [["k1", ""]] });
    const [[, page]] = (allocated.body as { results: [string, number][] }).results as [[string, number]];
    expect(await vllm(url, "/keys/confirm_write", { rank: 0, confirmations: [["k1", page]], pages_to_release: [] })).toMatchObject({ status: 204 });
    expect(grpcioExists(address, ["k1", "k2"])).toEqual([true, false]);
    expect(spawnSync("podman", ["healthcheck", "run", serve]).status).toBe(0);

    const stopped = stop(serve);
    expect(stopped.code).toBe(0); // 137 had tini not passed SIGTERM on and podman killed it
    expect(stopped.log).toContain('"signal":"SIGTERM","msg":"shutting down"');
    expect(stopped.log).toContain('"msg":"stopped"');

    const again = start(`hf3fs-serve-again-${id}`, ["-p", "127.0.0.1::18000", "-v", `${data}:/var/lib/hf3fs-metadata`]);
    await logged(again, "ready");
    expect(grpcioExists(podman("port", again, "18000/tcp"), ["k1"])).toEqual([true]);
  }, 120_000);

  it("runs the relay: a vLLM call on the relay's port is answered by the server upstream", async () => {
    const serve = start(`hf3fs-upstream-${id}`, ["-p", "127.0.0.1::18000"], ["serve", "--in-memory"]);
    await logged(serve, "ready");
    const upstream = `http://${podman("port", serve, "18000/tcp")}`;
    expect(await vllm(upstream, "/rank/0/initialize", { num_pages: 4 })).toMatchObject({ status: 200 });
    const relay = start(`hf3fs-relay-${id}`, ["--network", "host"], ["relay", "--host", "127.0.0.1", "--port", "0", "--upstream", upstream]);
    const { url } = await logged(relay, "listening");
    expect(await vllm(url!, "/keys/batch_allocate", { rank: 0, keys: [["r1", ""]] })).toMatchObject({ status: 200, body: { rank: 0 } });
    expect(spawnSync("podman", ["exec", relay, "hf3fs-metadata", "health", "--server", url!]).status).toBe(0);
    expect(stop(relay).code).toBe(0);
    expect(stop(serve).code).toBe(0);
  }, 120_000);
});
