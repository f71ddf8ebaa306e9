import { describe, expect, it } from "vitest";
import { parseDuration } from "../../src/server/duration.js";
import { defaultServerOptions, envName, parseServerOptions } from "../../src/server/options.js";

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["60s", 60_000],
    ["10m", 600_000],
    ["1h", 3_600_000],
    ["1.5s", 1_500],
    ["250", 250],
  ])("reads %s as %i ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["", "5x", "-1s", "s"])("rejects %j", (text) => expect(() => parseDuration(text)).toThrow(/not a duration/));
});

describe("parseServerOptions", () => {
  it("defaults to 127.0.0.1:18000 with the documented TTLs", () => {
    expect(parseServerOptions([], {})).toEqual(defaultServerOptions);
    expect(defaultServerOptions).toMatchObject({ host: "127.0.0.1", port: 18000, reservationTtlMs: 60_000, readLeaseTtlMs: 10_000, incompleteTtlMs: 600_000 });
  });

  it("reads HF3FS_METADATA_* variables, and flags win over them", () => {
    const env = { [envName("port")]: "18001", [envName("reservation-ttl")]: "5s", [envName("in-memory")]: "true" };
    expect(parseServerOptions([], env)).toMatchObject({ port: 18001, reservationTtlMs: 5_000, inMemory: true });
    expect(parseServerOptions(["--port", "18002", "--reservation-ttl", "500ms"], env)).toMatchObject({ port: 18002, reservationTtlMs: 500 });
  });

  it("rejects unknown flags and malformed values", () => {
    expect(() => parseServerOptions(["--nope"], {})).toThrow();
    expect(() => parseServerOptions(["--port", "x"], {})).toThrow(/whole number/);
    expect(() => parseServerOptions(["--read-lease-ttl", "soon"], {})).toThrow(/read-lease-ttl/);
    expect(() => parseServerOptions(["--port", "70000"], {})).toThrow(/65535/);
    expect(() => parseServerOptions(["--max-key-bytes", "1025"], {})).toThrow(/--max-key-bytes must be at most 1024/);
    expect(parseServerOptions(["--max-key-bytes", "1024"], {}).maxKeyBytes).toBe(1024);
  });
});
