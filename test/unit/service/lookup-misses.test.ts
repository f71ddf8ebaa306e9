import { describe, expect, it } from "vitest";
import { answeringMisses, callsAnsweringMisses, type MissGate, missesOf, PendingLookups } from "../../../src/service/lookup-misses.js";
import type { LocalService } from "../../../src/service/metadata-service.js";

describe("PendingLookups", () => {
  it("answers a lookup with its server's answer, or undefined once given up before it; an error passes", async () => {
    const pending = new PendingLookups();
    expect(await pending.race(Promise.resolve("answer"))).toBe("answer");
    let answer: (value: string) => void = () => undefined;
    const given = pending.race(new Promise<string>((resolve) => (answer = resolve)));
    pending.giveUp();
    answer("late");
    expect(await given).toBeUndefined();
    await expect(pending.race(Promise.reject(new Error("refused")))).rejects.toThrow("refused");
  });
});

describe("answering lookups as misses", () => {
  const gate = (missing: boolean, heard: string[]): MissGate => ({ missing: () => missing, missed: (method) => heard.push(method) });
  const service = {
    batchExists: async () => ({ exists: [true] }),
    getLocations: async () => ({ pages: [7] }),
    batchAllocate: async () => ({ pages: [1] }),
  } as unknown as LocalService;

  it("answers every key a miss, marked, while the gate says so, and leaves every other call to the service", async () => {
    const heard: string[] = [];
    const missing = answeringMisses(service, gate(true, heard));
    const header = new Headers();
    expect(await missing.batchExists({ keys: ["a", "b"] } as never, { responseHeader: header } as never)).toMatchObject({ exists: [false, false] });
    expect(header.get("hf3fs-unreached")).toBe("1");
    expect(await missing.getLocations({ keys: ["a"] } as never)).toMatchObject({ pages: [-1] });
    expect(await missing.batchAllocate({ keys: ["a"] } as never)).toEqual({ pages: [1] });
    expect(heard).toEqual(["batchExists", "getLocations"]);
    const calls = callsAnsweringMisses(async () => ({ response: { pages: [1] } }) as never, gate(true, heard));
    expect(await calls("getLocations", { keys: ["x", "y"] } as never)).toMatchObject({ response: { pages: [-1, -1] }, unreached: true });
    expect(await calls("batchAllocate", { keys: ["x"] } as never)).toEqual({ response: { pages: [1] } });
  });

  it("asks the service while the gate does not say so", async () => {
    const heard: string[] = [];
    const answering = answeringMisses(service, gate(false, heard));
    expect(await answering.batchExists({ keys: ["a"] } as never)).toEqual({ exists: [true] });
    expect(heard).toEqual([]);
    expect(missesOf("batchExists", { keys: [] } as never)).toMatchObject({ exists: [] });
  });
});
