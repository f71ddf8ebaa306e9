import { afterEach, describe, expect, it } from "vitest";
import { choiceOption, choicesOption } from "../../bench/harness/options.js";

// A probe's mode or pattern mistyped ran as if given nothing the probe knew (a cast, no check), and measured something else.
describe("bench options", () => {
  const argv = process.argv;
  afterEach(() => {
    process.argv = argv;
  });
  const given = (...flags: string[]) => {
    process.argv = [argv[0]!, "probe.ts", ...flags];
  };

  it("takes one of the choices, or the fallback when not given", () => {
    given("--pattern=loop");
    expect(choiceOption("pattern", ["engine", "loop"], "engine")).toBe("loop");
    given();
    expect(choiceOption("pattern", ["engine", "loop"], "engine")).toBe("engine");
  });

  it("stops at a value not among the choices, naming them", () => {
    given("--pattern=engine,loop");
    expect(() => choiceOption("pattern", ["engine", "loop"], "engine")).toThrow('--pattern: "engine,loop" is not one of engine, loop');
    given("--pattern=");
    expect(() => choiceOption("pattern", ["engine", "loop"], "engine")).toThrow('""');
  });

  it("takes a list of choices, and stops at any one not among them", () => {
    given("--modes=idle,members");
    expect(choicesOption("modes", ["members", "leader", "idle"], "members")).toEqual(["idle", "members"]);
    given("--modes=members,leeder");
    expect(() => choicesOption("modes", ["members", "leader", "idle"], "members")).toThrow('"leeder" is not one of members, leader, idle');
  });
});
