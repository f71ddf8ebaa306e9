import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { afterEach } from "vitest";

const BIN = new URL("../../src/cli/bin.mjs", import.meta.url).pathname;

export interface ChildServer {
  url: string;
  child: ChildProcess;
  /** lines are the stdout lines so far. */
  lines: string[];
  /** logged resolves once the server logged a line with this msg (e.g. "ready": its state is loaded and calls are served). */
  logged(msg: string): Promise<void>;
  /** exited resolves with the exit code, once the process ended and all its output was read. */
  exited: Promise<number | null>;
  /** stderr is what the server wrote to stderr so far. */
  readonly stderr: string;
}

const children = new Set<ChildProcess>();

afterEach(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  children.clear();
});

/** runCli runs the CLI to completion and returns its exit code and output. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

/**
 * startChildServer runs `hf3fs-metadata serve` on 127.0.0.1 and an
 * ephemeral port, killed after the test; `wrapper` is a command that runs
 * it (e.g. prlimit with its options).
 */
export async function startChildServer(args: string[] = ["--in-memory"], env: NodeJS.ProcessEnv = {}, wrapper: string[] = []): Promise<ChildServer> {
  return startChild("serve", args, env, wrapper);
}

/** startChildRelay runs `hf3fs-metadata relay` on 127.0.0.1 (an ephemeral port unless args give --port), killed after the test; `wrapper` as startChildServer's. */
export function startChildRelay(args: string[], env: NodeJS.ProcessEnv = {}, wrapper: string[] = []): Promise<ChildServer> {
  return startChild("relay", args, env, wrapper);
}

/** startInstalledCommand runs `verb` of an installed hf3fs-metadata command (`bin`, run as the shell would run it) like startChildServer. */
export function startInstalledCommand(bin: string, verb: "serve" | "relay", args: string[]): Promise<ChildServer> {
  return startChild(verb, args, {}, [], [bin]);
}

/** startChild runs a listening command of the CLI and resolves once it logged "listening". */
function startChild(verb: "serve" | "relay", args: string[], env: NodeJS.ProcessEnv, wrapper: string[], cli = [process.execPath, BIN]): Promise<ChildServer> {
  return spawnChild(verb, args, env, wrapper, cli).listening;
}

/** SpawnedChild is a listening command of the CLI as it starts: its output so far, and its ChildServer once it listens. */
export interface SpawnedChild {
  child: ChildProcess;
  lines: string[];
  logged(msg: string): Promise<void>;
  listening: Promise<ChildServer>;
}

/** spawnChildRelay starts `hf3fs-metadata relay` like startChildRelay, returning at once: a relay that waits for its port (a surge's) listens only later. */
export function spawnChildRelay(args: string[]): SpawnedChild {
  return spawnChild("relay", args, {}, []);
}

/** spawnChild runs a listening command of the CLI on 127.0.0.1 (an ephemeral port unless args give --port), killed after the test. */
function spawnChild(verb: "serve" | "relay", args: string[], env: NodeJS.ProcessEnv, wrapper: string[], cli = [process.execPath, BIN]): SpawnedChild {
  const command = [...wrapper, ...cli, verb, "--host", "127.0.0.1", "--port", "0", ...args];
  const child = spawn(command[0]!, command.slice(1), {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const lines: string[] = [];
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const url = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      lines.push(line);
      const event = JSON.parse(line) as { msg?: string; url?: string };
      if (event.msg === "listening") resolve(event.url!);
    });
    exited.then((code) => reject(new Error(`server exited with ${code} before listening: ${stderr}`)));
  });
  const logged = async (msg: string) => {
    const has = () => lines.some((line) => (JSON.parse(line) as { msg?: string }).msg === msg);
    const died = exited.then(() => Promise.reject(new Error(`server exited before logging "${msg}"`)));
    died.catch(() => undefined); // it rejects once the server exits, whether or not anyone still waits
    while (!has()) await Promise.race([once(child.stdout!, "data"), died]);
  };
  const listening = url.then((listeningAt) => ({
    url: listeningAt,
    child,
    lines,
    logged,
    exited,
    get stderr() {
      return stderr;
    },
  }));
  return { child, lines, logged, listening };
}
