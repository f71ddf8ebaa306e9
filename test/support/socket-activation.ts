import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach } from "vitest";
import { tempDir } from "./temp-dir.js";

const SCRIPT = new URL("./socket_activation.py", import.meta.url).pathname;

/** ActivationSocket is a listening socket kept as systemd keeps a socket unit's: `wrapper` runs a command as its socket-activated service. */
export interface ActivationSocket {
  /** port is the socket's, on the host it was asked for. */
  port: number;
  /** wrapper, put before a command, runs it with the socket as systemd passes it (startChildServer's and startChildRelay's `wrapper`). */
  wrapper: string[];
}

const holders: (() => void)[] = [];

afterEach(() => {
  for (const kill of holders.splice(0)) kill();
});

/** activationSocket listens on `host` and a free port in a process of its own (socket_activation.py), which never accepts; it is stopped after the test. */
export async function activationSocket(host = "127.0.0.1"): Promise<ActivationSocket> {
  const path = join(tempDir(), "handoff");
  const holder = spawn("/usr/bin/python3", [SCRIPT, "hold", path, host], { stdio: ["ignore", "pipe", "inherit"] });
  holders.push(() => holder.kill("SIGKILL"));
  const [line] = (await Promise.race([once(createInterface({ input: holder.stdout }), "line"), once(holder, "exit")])) as [string];
  const port = Number(line);
  if (!Number.isInteger(port) || port <= 0) throw new Error(`socket_activation.py hold did not print its port (got ${line})`);
  return { port, wrapper: ["/usr/bin/python3", SCRIPT, "run", path] };
}
