import { describe, expect, it } from "vitest";
import { systemdSocket } from "../../../src/cli/systemd-socket.js";

describe("systemdSocket", () => {
  it("is file descriptor 3 when systemd passed one socket to this process, and takes LISTEN_* out of the environment", () => {
    const env: NodeJS.ProcessEnv = { LISTEN_PID: "4242", LISTEN_FDS: "1", LISTEN_FDNAMES: "metadata", PATH: "/bin" };
    expect(systemdSocket(env, 4242)).toBe(3);
    expect(env).toEqual({ PATH: "/bin" });
  });

  it("is undefined without LISTEN_FDS, or when LISTEN_PID names another process (a parent's, inherited): the port is bound as usual", () => {
    expect(systemdSocket({}, 4242)).toBeUndefined();
    expect(systemdSocket({ LISTEN_FDS: "1" }, 4242)).toBeUndefined();
    const parents: NodeJS.ProcessEnv = { LISTEN_PID: "1", LISTEN_FDS: "1" };
    expect(systemdSocket(parents, 4242)).toBeUndefined();
    expect(parents).toEqual({});
  });

  it("refuses more than one socket, naming the socket unit's setting", () => {
    expect(() => systemdSocket({ LISTEN_PID: "7", LISTEN_FDS: "2" }, 7)).toThrow(/passed 2 sockets.*one ListenStream=/);
  });
});
