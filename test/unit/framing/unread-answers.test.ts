import { describe, expect, it } from "vitest";
import { type Answer, UnreadAnswers } from "../../../src/framing/http/unread-answers.js";

/** FakeAnswer is an answer in one of the states a stream goes through: open, ended and unsent (holding bytes), finished. */
class FakeAnswer implements Answer {
  writableEnded = true;
  writableFinished = false;
  constructor(
    readonly name: string,
    public writableLength: number,
  ) {}
}

function sweeper(limitMs: number, maxBytes: number) {
  const cancelled: string[] = [];
  const unread = new UnreadAnswers<FakeAnswer>(limitMs, maxBytes, (answer) => {
    cancelled.push(answer.name);
    answer.writableFinished = true; // a reset stream is closed: the listener forgets it
  });
  return { unread, cancelled };
}

describe("UnreadAnswers", () => {
  it("cancels an answer found unsent at two sweeps the time limit apart, and no other", () => {
    const { unread, cancelled } = sweeper(1_000, Number.MAX_SAFE_INTEGER);
    const stuck = new FakeAnswer("stuck", 10);
    const taken = new FakeAnswer("taken", 10);
    const running = new FakeAnswer("running", 0);
    running.writableEnded = false; // still being answered: not the caller's to take yet
    const connections = [[stuck, taken, running]];
    expect(unread.sweep(connections, 0)).toBe(true); // answers wait unsent: the next sweep must come
    taken.writableFinished = true;
    unread.sweep(connections, 999);
    expect(cancelled).toEqual([]);
    expect(unread.sweep(connections, 1_000)).toBe(false); // none waits: the running one is not ended
    expect(cancelled).toEqual(["stuck"]);
    running.writableEnded = true; // ended late: its own time starts at the sweep that first sees it
    expect(unread.sweep(connections, 1_500)).toBe(true);
    unread.sweep(connections, 2_400);
    expect(cancelled).toEqual(["stuck"]);
    expect(unread.sweep(connections, 2_500)).toBe(false);
    expect(cancelled).toEqual(["stuck", "running"]);
    expect(unread.cancelled).toEqual({ time: 2, bytes: 0 });
  });

  it("past the byte limit, cancels the unsent answers of the connection holding the most, then the next's, until under it", () => {
    const { unread, cancelled } = sweeper(60_000, 40);
    const small = [new FakeAnswer("a1", 30)];
    const large = [new FakeAnswer("b1", 40), new FakeAnswer("b2", 40)];
    const middle = [new FakeAnswer("c1", 50)];
    const open = new FakeAnswer("c2", 1_000);
    open.writableEnded = false; // bytes of an answer still being written are not counted
    middle.push(open);
    expect(unread.sweep([small, large, middle], 0)).toBe(true); // a1 is kept, unsent
    expect(cancelled).toEqual(["b1", "b2", "c1"]);
    unread.sweep([small, large, middle], 1);
    expect(cancelled).toEqual(["b1", "b2", "c1"]);
    expect(unread.cancelled).toEqual({ time: 0, bytes: 3 });
  });

  it("leaves answers at the byte limit alone", () => {
    const { unread, cancelled } = sweeper(60_000, 70);
    unread.sweep([[new FakeAnswer("a1", 30)], [new FakeAnswer("b1", 40)]], 0);
    expect(cancelled).toEqual([]);
  });
});
