import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SlowReads } from "../../../src/framing/http/read-body.js";

type Read = Parameters<SlowReads["add"]>[0];

/** slowRead is a body read begun now that, cut, records the error and leaves `reads` (as a BodyRead does). */
const slowRead = (reads: SlowReads) => {
  const read = { startedMs: performance.now(), cut: vi.fn(() => reads.delete(read)) } as unknown as Read & { cut: ReturnType<typeof vi.fn> };
  return { read, cut: read.cut };
};

describe("SlowReads", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "performance"] }));
  afterEach(() => vi.useRealTimers());

  it("cuts a body that did not arrive within its timeout, and not one still within it", () => {
    const reads = new SlowReads(4_000);
    const late = slowRead(reads);
    reads.add(late.read);
    vi.advanceTimersByTime(3_000);
    const fresh = slowRead(reads);
    reads.add(fresh.read);
    vi.advanceTimersByTime(2_000);
    expect(late.cut).toHaveBeenCalledOnce();
    expect(String(late.cut.mock.calls[0]?.[0])).toMatch(/within 4000 ms/);
    expect(fresh.cut).not.toHaveBeenCalled();
    reads.close();
  });

  it("stops its timer once no body is being read, and starts it again with the next", () => {
    const reads = new SlowReads(4_000);
    const first = slowRead(reads);
    reads.add(first.read);
    expect(vi.getTimerCount()).toBe(1);
    reads.delete(first.read);
    vi.advanceTimersByTime(1_000);
    expect(vi.getTimerCount()).toBe(0);
    const next = slowRead(reads);
    reads.add(next.read);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(5_000);
    expect(next.cut).toHaveBeenCalledOnce();
    reads.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
