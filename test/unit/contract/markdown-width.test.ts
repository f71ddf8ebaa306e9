import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../../../", import.meta.url).pathname;
const WIDTH = 100;

/** longLines are the prose lines of a Markdown text past WIDTH: code blocks and tables aside, and a line of one word (a long URL) allowed. */
function longLines(text: string): string[] {
  let code = false;
  return text.split("\n").filter((line) => {
    if (line.startsWith("```")) code = !code;
    return !code && !line.startsWith("|") && !line.startsWith("```") && line.length > WIDTH && line.trim().includes(" ");
  });
}

describe("the documentation's Markdown", () => {
  it(`is wrapped at ${WIDTH} columns (python3 .ci/wrap-markdown.py README.md docs/*.md)`, () => {
    const files = [
      "README.md",
      ...readdirSync(join(ROOT, "docs"))
        .filter((f) => f.endsWith(".md"))
        .map((f) => `docs/${f}`),
    ];
    const long = files.flatMap((file) => longLines(readFileSync(join(ROOT, file), "utf8")).map((line) => `${file}: ${line.slice(0, 60)}…`));
    expect(long).toEqual([]);
  });

  it("finds a long line when there is one, and passes code blocks and tables", () => {
    expect(longLines(`${"word ".repeat(30)}\n`)).toHaveLength(1);
    expect(longLines(`\`\`\`\n${"word ".repeat(30)}\n\`\`\`\n| ${"cell ".repeat(30)} |\n`)).toEqual([]);
  });
});
