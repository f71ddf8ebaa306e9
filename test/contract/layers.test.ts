import { spawnSync } from "node:child_process";
import { cpSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const DEPCRUISE = join(ROOT, "node_modules/.bin/depcruise");

/** cruise runs the layer rules of `npm run lint` on a copy of src/ with `extra` files added, and says whether they passed and what they printed. */
function cruise(extra: Record<string, string>): { ok: boolean; output: string } {
  const dir = tempDir();
  cpSync(join(ROOT, "src"), join(dir, "src"), { recursive: true });
  cpSync(join(ROOT, "gen"), join(dir, "gen"), { recursive: true });
  cpSync(join(ROOT, "tsconfig.json"), join(dir, "tsconfig.json"));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  for (const [path, text] of Object.entries(extra)) writeFileSync(join(dir, path), text);
  const run = spawnSync(DEPCRUISE, ["src", "--config", join(ROOT, ".dependency-cruiser.cjs")], { cwd: dir, encoding: "utf8" });
  return { ok: run.status === 0, output: run.stdout + run.stderr };
}

describe("the layers of src/ (npm run lint)", () => {
  it("hold today", () => {
    expect(cruise({})).toMatchObject({ ok: true });
  });

  it("fail the lint when the core imports a layer above it, the service the process, or a circle closes", () => {
    const upward = cruise({ "src/core/bad-import.ts": 'export { createLogger } from "../server/logger.js";\n' });
    expect(upward.ok).toBe(false);
    expect(upward.output).toContain("core-is-pure");
    const service = cruise({ "src/service/bad-import.ts": 'export { startServer } from "../server/server.js";\n' });
    expect(service.output).toContain("service-below-server");
    const circle = cruise({
      "src/server/circle-a.ts": 'import { b } from "./circle-b.js";\nexport const a = () => b;\n',
      "src/server/circle-b.ts": 'import { a } from "./circle-a.js";\nexport const b = () => a;\n',
    });
    expect(circle.output).toContain("no-circles");
  });

  it("fail the lint when a layer above the core skips its public face (core/index.ts)", () => {
    const inside = cruise({ "src/service/bad-import.ts": 'export { Registry } from "../core/registry.js";\n' });
    expect(inside.ok).toBe(false);
    expect(inside.output).toContain("core-has-one-face");
    expect(cruise({ "src/service/good-import.ts": 'export { MetadataState } from "../core/index.js";\n' })).toMatchObject({ ok: true });
  });

  it("fail the lint when the service reads the wire itself or a framing reaches the process", () => {
    const http = cruise({ "src/service/bad-import.ts": 'import * as http2 from "node:http2";\nexport const h = http2;\n' });
    expect(http.ok).toBe(false);
    expect(http.output).toContain("service-knows-no-http");
    const plain = cruise({ "src/service/bad-import.ts": 'import * as http from "http";\nexport const h = http;\n' });
    expect(plain.output).toContain("service-knows-no-http");
    const framing = cruise({ "src/service/bad-import.ts": 'export { HttpBodyReader } from "../framing/http/body-reader.js";\n' });
    expect(framing.output).toContain("service-below-server");
    const upward = cruise({ "src/framing/bad-import.ts": 'export { startServer } from "../server/server.js";\n' });
    expect(upward.output).toContain("framing-below-server");
  });

  it("fail the lint when the store, replication or the server reach above them", () => {
    const store = cruise({ "src/store/bad-import.ts": 'export { Edge } from "../service/edge.js";\n' });
    expect(store.output).toContain("store-below-service");
    const replication = cruise({ "src/replication/bad-import.ts": 'export { startServer } from "../server/server.js";\n' });
    expect(replication.output).toContain("replication-below-server");
    const server = cruise({ "src/server/bad-import.ts": 'export { parseServerOptions } from "../cli/serve-options.js";\n' });
    expect(server.output).toContain("server-below-cli");
  });

  it("fail the lint when the relay reaches the CLI, or a layer below reaches the relay", () => {
    const relay = cruise({ "src/relay/bad-import.ts": 'export { RELAY } from "../cli/relay-command.js";\n' });
    expect(relay.output).toContain("relay-below-cli");
    const server = cruise({ "src/server/bad-import.ts": 'export { startRelay } from "../relay/relay.js";\n' });
    expect(server.output).toContain("relay-on-top");
  });
});
