import type { connectNodeAdapter } from "@connectrpc/connect-node";
import { Code } from "@connectrpc/connect";
import { Reason, ReasonSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { invalidArgument, MetadataError } from "../../core/errors.js";
import { codeOfReason, httpStatusOf } from "../error-table.js";
import { commit, type Ledger } from "../metadata-service.js";
import { codeName, type Edge } from "../edge.js";
import type { JsonObject } from "./json-body.js";
import type { JsonReply, JsonRoute } from "./json-route.js";

/** NodeHandler is connect-node's handler of a request of either HTTP version. */
type NodeHandler = NonNullable<NonNullable<Parameters<typeof connectNodeAdapter>[0]>["fallback"]>;
type Request = Parameters<NodeHandler>[0];
type Response = Parameters<NodeHandler>[1];

/** ErrorBody is the JSON body of every error of the JSON routes. */
export interface ErrorBody {
  /** detail is a sentence for people. */
  detail: string;
  /** reason is the ErrorInfo reason's name, e.g. "REASON_RANK_NOT_INITIALIZED". */
  reason: string;
  /** code is the gRPC/Connect code, e.g. "failed_precondition". */
  code: string;
}

/**
 * jsonRouter serves JSON dialects (POST, body application/json) on the
 * ledger: it reads and parses the body (at most maxBodyBytes), runs the
 * matching route, commits, and answers; every error becomes an ErrorBody
 * with the HTTP status of error-table.ts.
 */
export function jsonRouter(ledger: Ledger, edge: Edge, routes: readonly JsonRoute[], maxBodyBytes: number) {
  return async (req: Request, res: Response): Promise<void> => {
    const path = (req.url ?? "/").split("?")[0]!;
    let params: string[] | undefined;
    const route = routes.find((r) => (params = r.pattern.exec(path)?.slice(1)) !== undefined);
    if (route === undefined) return send(res, { status: 404, body: errorBody(`no route ${req.method} ${path}`, Reason.UNSPECIFIED, Code.Unimplemented) });
    if (req.method !== "POST") {
      res.setHeader("allow", "POST");
      return send(res, { status: 405, body: errorBody(`${path} takes POST, not ${req.method}`, Reason.UNSPECIFIED, Code.Unimplemented) });
    }
    let reply: JsonReply;
    const started = performance.now();
    try {
      if (edge.lifecycle.refusal !== undefined) throw edge.lifecycle.refusal;
      const body = await readJson(req, maxBodyBytes);
      if (body === undefined) {
        req.resume(); // drain what the client still sends
        return send(res, { status: 413, body: errorBody(`request body larger than ${maxBodyBytes} bytes`, Reason.LIMIT_EXCEEDED, Code.ResourceExhausted) }, true);
      }
      reply = route.handle(ledger, body, params!);
      await commit(ledger);
    } catch (error) {
      reply = errorReply(error);
    }
    edge.observe(route.name, reply.status < 300 ? "ok" : (reply.body as ErrorBody).code, (performance.now() - started) / 1_000);
    send(res, reply);
  };
}

/**
 * readJson reads a body as a JSON object; undefined when it is larger than
 * maxBytes (the rest is drained, not kept, so the 413 answer still reaches
 * the client). An empty body is {}.
 */
async function readJson(req: Request, maxBytes: number): Promise<JsonObject | undefined> {
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) return undefined;
  const body = await new Promise<Buffer | undefined>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
    });
    req.on("end", () => resolve(size > maxBytes ? undefined : Buffer.concat(chunks)));
    req.on("error", reject);
  });
  if (body === undefined) return undefined;
  if (body.length === 0) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch (e) {
    throw invalidArgument("body", `request body is not JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw invalidArgument("body", "request body must be a JSON object");
  return parsed as JsonObject;
}

function errorReply(error: unknown): JsonReply {
  if (error instanceof MetadataError) {
    return { status: httpStatusOf(error.reason), body: errorBody(error.message, error.reason, codeOfReason[error.reason]) };
  }
  return { status: 500, body: errorBody("internal error", Reason.INTERNAL, Code.Internal) };
}

function errorBody(detail: string, reason: Reason, code: Code): ErrorBody {
  return { detail, reason: ReasonSchema.values.find((v) => v.number === reason)!.name, code: codeName(code) };
}

function send(res: Response, reply: JsonReply, close = false): void {
  if (close && "shouldKeepAlive" in res) (res as { shouldKeepAlive: boolean }).shouldKeepAlive = false;
  if (reply.body === undefined) {
    res.writeHead(reply.status);
    res.end();
    return;
  }
  const json = JSON.stringify(reply.body);
  res.writeHead(reply.status, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
  res.end(json);
}
