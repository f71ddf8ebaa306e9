import type * as http from "node:http";
import type * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, MetadataService, Reason, ReasonSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { answerHeaders, LOG_POSITION, SERVER_ID_HEADER } from "../../protocol/headers.js";
import { codeName, type Edge } from "../../service/edge.js";
import { httpStatusOf, reasonOf } from "../../service/error-table.js";
import { parseJsonObject } from "../../service/json/json-body.js";
import type { JsonReply, JsonRoute } from "../../service/json/json-route.js";
import { checkWireIntegers } from "../../service/json/wire-integers.js";
import type { MetadataCalls, MethodName } from "../../service/metadata-calls.js";

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

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
 * jsonRouter is the framing of the JSON dialects (POST, body
 * application/json): it finds the route, runs it through the edge on
 * `calls` (the server's handlers, or a relay's upstream), and writes the
 * reply, or the edge's error as an ErrorBody with its HTTP status.
 * With `redirect`, a standby's NOT_LEADER naming the leader is a 307 to it.
 */
export function jsonRouter(calls: MetadataCalls, edge: Edge, routes: readonly JsonRoute[], redirect = true) {
  return async (req: Request, res: Response): Promise<void> => {
    const path = (req.url ?? "/").split("?")[0]!;
    const { route, params } = match(routes, path);
    if (route === undefined) return send(req, res, errorReply(new ConnectError(`no route ${req.method} ${path}`, Code.Unimplemented), 404));
    if (req.method !== "POST") {
      res.setHeader("allow", "POST");
      return send(req, res, errorReply(new ConnectError(`${path} takes POST, not ${req.method}`, Code.Unimplemented), 405));
    }
    // A caller that leaves (its connection or stream closes before the answer) ends the call: a relay stops waiting for its upstream.
    const left = new AbortController();
    res.once("close", () => res.writableFinished || left.abort());
    let reply: JsonReply;
    try {
      reply = await edge.call(route.name, { body: req, decode: parseJsonObject }, (body) => run(calls, route, body, params, left.signal));
      if (edge.position !== undefined) reply = { ...reply, headers: { ...reply.headers, [LOG_POSITION]: String(edge.position()) } };
    } catch (error) {
      reply = errorReply(error as ConnectError); // the edge throws nothing else
      // A relay's error carries the id of the server that gave it (a server's own id is on every response already).
      const serverId = (error as ConnectError).metadata.get(SERVER_ID_HEADER)?.split(",")[0]?.trim();
      if (serverId) reply = { ...reply, headers: { [SERVER_ID_HEADER]: serverId } };
      const leaderUrl = leaderUrlOf(error as ConnectError);
      // A standby that refuses calls sends them to the leader: 307 keeps method and body (vLLM's and SGLang's clients use requests,
      // which follows it). One that forwards never redirects: a call it answers itself gets 503, for the client to send again.
      if (redirect && leaderUrl !== "") reply = { ...reply, status: 307, headers: { location: `${leaderUrl}${req.url ?? path}` } };
    }
    send(req, res, reply);
  };
}

/** run translates a body into its route's call (its integers checked against their wire types), makes it (until signal aborts), and translates the answer (with the server id of a server that answered for this process, and the mark of one no server answered). */
async function run(calls: MetadataCalls, route: JsonRoute, body: Record<string, unknown>, params: string[], signal: AbortSignal): Promise<JsonReply> {
  const schema = MetadataService.method[route.method].input;
  const fields = route.request(body, params);
  checkWireIntegers(schema, fields as Record<string, unknown>);
  const request = create(schema, fields) as never;
  const { response, serverId, unreached } = await calls(route.method, request, signal);
  const reply = route.reply(response as never, request);
  return serverId === undefined && !unreached ? reply : { ...reply, headers: { ...reply.headers, ...answerHeaders(serverId, unreached) } };
}

/**
 * callNameOf is the name a request's call has at the edge (its access and
 * metrics): a MetadataService method's name for a gRPC, gRPC-Web or Connect
 * call, a route's name for a JSON route, else the path.
 */
export function callNameOf(path: string, routes: readonly JsonRoute[]): string {
  const prefix = `/${MetadataService.typeName}/`;
  if (path.startsWith(prefix)) return path.slice(prefix.length);
  return match(routes, path.split("?")[0]!).route?.name ?? path;
}

/** methodOfCall is the MetadataService method of a call by its name at the edge (callNameOf): a JSON route's, or an RPC's own; undefined for any other call. */
export function methodOfCall(name: string, routes: readonly JsonRoute[]): MethodName | undefined {
  const route = routes.find((r) => r.name === name);
  if (route !== undefined) return route.method;
  const method = `${name.charAt(0).toLowerCase()}${name.slice(1)}`;
  return method in MetadataService.method && MetadataService.method[method as MethodName].name === name ? (method as MethodName) : undefined;
}

/** match finds the route of a path and its path parameters. */
function match(routes: readonly JsonRoute[], path: string): { route?: JsonRoute; params: string[] } {
  for (const route of routes) {
    const found = route.pattern.exec(path);
    if (found !== null) return { route, params: found.slice(1) };
  }
  return { params: [] };
}

/** leaderUrlOf is the leader named by a NOT_LEADER error, "" for any other error or when no leader is known. */
function leaderUrlOf(error: ConnectError): string {
  return reasonOf(error) === Reason.NOT_LEADER ? (error.findDetails(ErrorInfoSchema)[0]?.leaderUrl ?? "") : "";
}

/** errorReply is an error's JSON reply: its HTTP status from the error table unless given. */
function errorReply(error: ConnectError, status = httpStatusOf(error)): JsonReply {
  const reason = ReasonSchema.values.find((v) => v.number === reasonOf(error))!.name;
  const body: ErrorBody = { detail: error.rawMessage, reason, code: codeName(error.code) };
  return { status, body };
}

/** send writes a reply; an HTTP/1.1 connection whose request was not read to its end is closed after it. */
function send(req: Request, res: Response, reply: JsonReply): void {
  if (!req.complete && "shouldKeepAlive" in res) res.shouldKeepAlive = false;
  if (reply.body === undefined) {
    res.writeHead(reply.status, reply.headers);
    res.end();
    return;
  }
  const json = JSON.stringify(reply.body);
  res.writeHead(reply.status, { ...reply.headers, "content-type": "application/json", "content-length": Buffer.byteLength(json) });
  res.end(json);
}
