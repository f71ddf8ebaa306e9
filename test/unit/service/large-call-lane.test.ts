import { describe, expect, it } from "vitest";
import { LargeCallLane } from "../../../src/service/large-call-lane.js";

describe("LargeCallLane", () => {
  it("runs large calls one at a time, each step in a turn of its own, with other work served between steps", async () => {
    const lane = new LargeCallLane();
    const log: string[] = [];
    const large = (name: string) =>
      lane.run(async (turn) => {
        log.push(`${name}:decode`);
        setImmediate(() => log.push(`small call after ${name}:decode`));
        await turn();
        log.push(`${name}:core`);
        await turn();
        log.push(`${name}:commit`);
        return name;
      });
    const results = await Promise.all([large("a"), large("b")]);
    expect(results).toEqual(["a", "b"]);
    expect(log).toEqual(["a:decode", "small call after a:decode", "a:core", "a:commit", "b:decode", "small call after b:decode", "b:core", "b:commit"]);
  });

  it("goes on with the next call when one fails", async () => {
    const lane = new LargeCallLane();
    const failed = lane.run(async () => {
      throw new Error("bad request");
    });
    await expect(failed).rejects.toThrow("bad request");
    await expect(lane.run(async () => "next")).resolves.toBe("next");
  });
});
