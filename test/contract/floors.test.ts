import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module of the CI's tools, without types
import { floors, withFloors } from "../../.ci/floors.mjs";

const PAGE = new URL("../../docs/architecture.md", import.meta.url);

describe("the picture of src/'s floors in docs/architecture.md", () => {
  it("is the import graph of src/ as it is (node .ci/floors.mjs --write draws it again)", () => {
    const page = readFileSync(PAGE, "utf8");
    expect(withFloors(page, floors())).toBe(page);
  });

  it("would show an import added between two floors", () => {
    const page = readFileSync(PAGE, "utf8");
    const picture = floors() as string;
    expect(picture).toContain("framing --> service");
    expect(withFloors(page, picture.replace("framing --> service\n", ""))).not.toBe(page);
  });
});
