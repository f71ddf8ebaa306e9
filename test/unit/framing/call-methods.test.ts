import { describe, expect, it } from "vitest";
import { callNameOf, methodOfCall } from "../../../src/framing/json/json-router.js";
import { sglangRoutes } from "../../../src/service/json/sglang-routes.js";
import { vllmRoutes } from "../../../src/service/json/vllm-routes.js";
import { READS } from "../../../src/service/metadata-calls.js";

const routes = [...vllmRoutes({ worldSize: 0, namespace: "" }), ...sglangRoutes];
const readAt = (path: string) => {
  const method = methodOfCall(callNameOf(path, routes), routes);
  return method !== undefined && READS.has(method);
};

describe("the MetadataService method of a call, by its name at the edge", () => {
  it("is the same read in every framing: gRPC and Connect's paths, vLLM's and SGLang's routes", () => {
    expect(methodOfCall("BatchExists", routes)).toBe("batchExists");
    expect(methodOfCall("vllm.batch_exists", routes)).toBe("batchExists");
    expect(methodOfCall("sglang.exists", routes)).toBe("batchExists");
    expect(methodOfCall("ConfirmWrite", routes)).toBe("confirmWrite");
    expect(methodOfCall("replication.Snapshot", routes)).toBeUndefined();
    expect(methodOfCall("batchExists", routes)).toBeUndefined();
    expect(
      ["/hf3fs.metadata.v1.MetadataService/BatchExists", "/hf3fs.metadata.v1.MetadataService/GetStats", "/keys/batch_exists", "/3/exists"].map(readAt),
    ).toEqual([true, true, true, true]);
    expect(["/hf3fs.metadata.v1.MetadataService/GetLocations", "/keys/get_locations", "/3/confirm_write", "/status.json"].map(readAt)).toEqual([
      false,
      false,
      false,
      false,
    ]);
  });
});
