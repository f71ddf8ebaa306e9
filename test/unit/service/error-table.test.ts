import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, Reason, ReasonSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../../src/core/errors.js";
import { codeOfReason, toConnectError } from "../../../src/service/error-table.js";

const expected: Record<string, Code> = {
  INVALID_ARGUMENT: Code.InvalidArgument,
  LIMIT_EXCEEDED: Code.InvalidArgument,
  PAGE_OUT_OF_RANGE: Code.InvalidArgument,
  RANK_NOT_INITIALIZED: Code.FailedPrecondition,
  RANK_CONFIG_MISMATCH: Code.FailedPrecondition,
  RESERVATION_NOT_FOUND: Code.FailedPrecondition,
  PAGE_IN_USE: Code.FailedPrecondition,
  SHUTTING_DOWN: Code.Unavailable,
  STORE_UNAVAILABLE: Code.Unavailable,
  INTERNAL: Code.Internal,
  UNAUTHENTICATED: Code.Unauthenticated,
  PERMISSION_DENIED: Code.PermissionDenied,
  OVERLOADED: Code.Unavailable,
  NOT_LEADER: Code.Unavailable,
  STARTING: Code.Unavailable,
  UPSTREAM_UNAVAILABLE: Code.Unavailable,
  READ_LEASED: Code.FailedPrecondition,
  WRITES_IN_FLIGHT: Code.FailedPrecondition,
  NAMESPACE_IN_USE: Code.FailedPrecondition,
  UNSPECIFIED: Code.Internal,
};

describe("the error table", () => {
  it.each(ReasonSchema.values.map((v) => [v.localName, v.number] as const))("maps %s to its code with an ErrorInfo detail", (name, reason) => {
    expect(codeOfReason[reason as Reason]).toBe(expected[name]);
    const error = toConnectError(new MetadataError(reason, "boom", { rank: 2, key: "k", page: 3, field: "pages" }), "ns");
    expect(error.code).toBe(expected[name]);
    expect(error.rawMessage).toBe("boom");
    const [info] = error.findDetails(ErrorInfoSchema);
    expect(info).toMatchObject({ reason, namespace: "ns", rank: 2, key: "k", page: 3, field: "pages" });
  });

  it("covers every reason of the contract", () => {
    expect(Object.keys(codeOfReason).length).toBe(ReasonSchema.values.length);
    expect(Object.keys(expected).length).toBe(ReasonSchema.values.length);
  });

  it("names the leader in the ErrorInfo of NOT_LEADER", () => {
    const error = toConnectError(new MetadataError(Reason.NOT_LEADER, "standby", { leaderUrl: "http://10.0.0.2:18000" }), "kv");
    expect(error.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: Reason.NOT_LEADER, leaderUrl: "http://10.0.0.2:18000" });
  });

  it("turns anything else into INTERNAL and keeps the cause", () => {
    const cause = new TypeError("bug");
    const error = toConnectError(cause, "kv");
    expect(error.code).toBe(Code.Internal);
    expect(error.cause).toBe(cause);
    expect(error.findDetails(ErrorInfoSchema)[0]?.reason).toBe(Reason.INTERNAL);
  });

  it("gives errors of the RPC stack a detail", () => {
    const error = toConnectError(new ConnectError("bad", Code.ResourceExhausted), "kv");
    expect(error.code).toBe(Code.ResourceExhausted);
    expect(error.findDetails(ErrorInfoSchema)[0]?.reason).toBe(Reason.LIMIT_EXCEEDED);
  });
});
