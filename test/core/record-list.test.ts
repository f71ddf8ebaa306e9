import { describe, expect, it } from "vitest";
import { type Linked, RecordList } from "../../src/core/record-list.js";

type Item = Linked & { id: string };
const item = (id: string): Item => ({ id, prev: undefined, next: undefined, list: undefined });
const ids = (list: RecordList<Item>) => [...list].map((r) => r.id);

describe("RecordList", () => {
  it("keeps insertion order, deletes anywhere, moves to the back", () => {
    const list = new RecordList<Item>();
    const [a, b, c] = [item("a"), item("b"), item("c")];
    for (const r of [a, b, c]) list.add(r);
    expect(ids(list)).toEqual(["a", "b", "c"]);
    list.moveToBack(a);
    expect(ids(list)).toEqual(["b", "c", "a"]);
    list.delete(c);
    expect(ids(list)).toEqual(["b", "a"]);
    expect([list.size, list.has(c), list.has(a)]).toEqual([2, false, true]);
    list.delete(b);
    list.delete(a);
    expect([ids(list), list.size]).toEqual([[], 0]);
  });

  it("ignores records of another list and lets a loop delete or move the record it is at", () => {
    const one = new RecordList<Item>();
    const other = new RecordList<Item>();
    const [a, b, c, d] = [item("a"), item("b"), item("c"), item("d")];
    for (const r of [a, b, c]) one.add(r);
    other.add(d);
    one.delete(d);
    expect(ids(other)).toEqual(["d"]);
    const seen: string[] = [];
    for (const r of one) {
      seen.push(r.id);
      if (r === a) one.delete(a);
      if (r === b && seen.length < 4) one.moveToBack(b);
    }
    expect(seen).toEqual(["a", "b", "c", "b"]);
    expect(ids(one)).toEqual(["c", "b"]);
  });
});
