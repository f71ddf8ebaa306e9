import { ConnectError } from "@connectrpc/connect";
import type { CallOptions } from "@grpc/grpc-js";
import { castGrpcError, EtcdInvalidAuthTokenError, type IOptions } from "etcd3";
import { createLeanGrpcTransport, type LeanGrpcTransport } from "../client/lean-grpc-transport.js";
import { envelope } from "../protocol/envelope.js";
import { decodeAuthenticateToken, encodeAuthenticate } from "../replication/etcd-authenticate.js";
import type { EtcdUnary } from "../replication/log-append.js";

/** SILENT_HOST_MS is how long calls avoid an endpoint after it let one run out its deadline (as etcd-client.ts's breakers). */
const SILENT_HOST_MS = 1_000;

/** TXN_PATH and AUTHENTICATE_PATH are etcd's KV.Txn and Auth.Authenticate as gRPC paths. */
const TXN_PATH = "/etcdserverpb.KV/Txn";
const AUTHENTICATE_PATH = "/etcdserverpb.Auth/Authenticate";

/** EtcdTxnClient sends KV.Txn calls to etcd on node:http2 (the lean way of LogAppend and LogEnd); closed with the member. */
export interface EtcdTxnClient {
  readonly txn: EtcdUnary;
  close(): void;
}

/**
 * etcdTxnClient is a lean client of etcd's KV.Txn for the leader's appends
 * and a standby's questions of the log's end: one node:http2 connection
 * per endpoint (the relay's lean gRPC transport), with the member's TLS
 * (etcd's CA, its client certificate) and etcd's user,
 * whose token it asks for with Auth.Authenticate and asks again when etcd
 * says it is no longer valid. Like etcd-client.ts, each call goes to an
 * endpoint at random, but one that let a call run out its deadline is
 * avoided for SILENT_HOST_MS (a minority at most); a failure is etcd3's
 * error type (castGrpcError of its gRPC code and message), so that
 * attempts() sends again what may be the endpoint's fault.
 */
export function etcdTxnClient(options: Pick<IOptions, "hosts" | "credentials" | "auth">): EtcdTxnClient {
  const hosts = (typeof options.hosts === "string" ? [options.hosts] : (options.hosts ?? [])).map((h) => (/^https?:\/\//.test(h) ? h : `http://${h}`));
  const credentials = options.credentials;
  const tls = credentials && { ca: credentials.rootCertificate, cert: credentials.certChain, key: credentials.privateKey };
  const transports: LeanGrpcTransport[] = hosts.map((baseUrl) => createLeanGrpcTransport({ baseUrl, tls }));
  const avoidedUntil = new Array<number>(hosts.length).fill(0);
  const mayAvoid = Math.floor((hosts.length - 1) / 2);
  let token: Promise<string> | undefined;

  const pick = (): number => {
    const now = performance.now();
    const open = hosts.map((_, i) => i).filter((i) => avoidedUntil[i]! <= now);
    const from = open.length > 0 ? open : hosts.map((_, i) => i);
    return from[Math.floor(Math.random() * from.length)]!;
  };

  /** tokenFor is etcd's token for the member's user (undefined without one), asked of `host` once and kept until etcd refuses it. */
  const tokenFor = (host: number, timeoutMs: number): Promise<string> | undefined => {
    if (options.auth === undefined) return undefined;
    if (token !== undefined) return token;
    const request = envelope(encodeAuthenticate(options.auth.username, options.auth.password));
    const asked = transports[host]!.unaryBytes(AUTHENTICATE_PATH, request, timeoutMs).then(decodeAuthenticateToken);
    token = asked;
    // A failed request is forgotten, once, and only while it is still the one kept (not a newer one).
    asked.catch(() => {
      if (token === asked) token = undefined;
    });
    return asked;
  };

  /** once sends the call to `host`; `sent` is the token it went with, so that a refusal forgets that token and not a newer one. */
  const once = async (host: number, request: Uint8Array, deadline: number, sent: { token?: Promise<string> }): Promise<Uint8Array> => {
    const left = () => Math.max(1, deadline - Date.now());
    sent.token = tokenFor(host, left());
    const headers = sent.token === undefined ? undefined : { token: await sent.token };
    return transports[host]!.unaryBytes(TXN_PATH, envelope(request), left(), headers);
  };

  const txn: EtcdUnary = async (request, callOptions: CallOptions) => {
    const deadline = callOptions.deadline instanceof Date ? callOptions.deadline.getTime() : Number(callOptions.deadline ?? Date.now() + 5_000);
    const host = pick();
    const sent: { token?: Promise<string> } = {};
    try {
      try {
        return await once(host, request, deadline, sent);
      } catch (error) {
        const cast = etcdError(error);
        if (!(cast instanceof EtcdInvalidAuthTokenError)) throw cast;
        if (token === sent.token) token = undefined; // etcd forgot it (a restart, its TTL): a new one, once
        return await once(host, request, deadline, sent);
      }
    } catch (error) {
      const cast = etcdError(error);
      if (cast.name === "GRPCDeadlineExceededError" && avoidedUntil.filter((t) => t > performance.now()).length < mayAvoid) {
        avoidedUntil[host] = performance.now() + SILENT_HOST_MS;
      }
      throw cast;
    }
  };

  return {
    txn,
    close: () => {
      for (const t of transports) t.close();
    },
  };
}

/** etcdError is a call's failure as the etcd3 client would have thrown it: its type by the gRPC code and etcd's message. */
function etcdError(error: unknown): Error {
  if (!(error instanceof ConnectError)) return error as Error;
  return castGrpcError(Object.assign(new Error(error.rawMessage), { code: error.code }));
}
