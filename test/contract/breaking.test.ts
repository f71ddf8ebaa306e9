import { execFile } from "node:child_process";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";

const exec = promisify(execFile);
const ROOT = new URL("../..", import.meta.url).pathname;
const BUF = join(ROOT, "node_modules/.bin/buf");
const PROTO = "proto/hf3fs/metadata/v1/metadata.proto";

/** copyContract copies buf.yaml and proto/ (with the committed baseline) into a fresh directory. */
function copyContract(): string {
  const dir = tempDir();
  cpSync(join(ROOT, "buf.yaml"), join(dir, "buf.yaml"));
  cpSync(join(ROOT, "proto"), join(dir, "proto"), { recursive: true });
  return dir;
}

async function breaking(dir: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await exec(BUF, ["breaking", "--against", "proto/baseline.binpb"], { cwd: dir });
    return { code: 0, output: stdout + stderr };
  } catch (e) {
    const error = e as { code: number; stdout: string; stderr: string };
    return { code: error.code, output: error.stdout + error.stderr };
  }
}

describe("buf breaking against the committed baseline", () => {
  it("passes for the contract as committed", async () => {
    expect(await breaking(copyContract())).toEqual({ code: 0, output: "" });
  });

  it.each([
    ["a changed field number", "  uint32 num_pages = 3;\n", "  uint32 num_pages = 13;\n"],
    ["a changed field type", "  repeated int32 pages = 1;\n  // statuses[i]", "  repeated int64 pages = 1;\n  // statuses[i]"],
    ["a removed RPC", "  rpc GetStats(GetStatsRequest) returns (GetStatsResponse) {\n    option idempotency_level = NO_SIDE_EFFECTS;\n  }\n", ""],
  ])("fails for %s", async (_, from, to) => {
    const dir = copyContract();
    const file = join(dir, PROTO);
    const text = readFileSync(file, "utf8");
    expect(text).toContain(from);
    writeFileSync(file, text.replace(from, to));
    const result = await breaking(dir);
    expect(result.code).not.toBe(0);
    expect(result.output).toContain("metadata.proto");
  });
});
