import { ConnectError } from "@connectrpc/connect";
import type { CallOptions } from "@grpc/grpc-js";
import { castGrpcError, EtcdInvalidAuthTokenError, GRPCDeadlineExceededError, type IOptions } from "etcd3";
import { createLeanGrpcTransport, type LeanGrpcTransport } from "../client/lean-grpc-transport.js";
import { envelope } from "../protocol/envelope.js";
import { decodeAuthenticateToken, encodeAuthenticate } from "../replication/etcd-authenticate.js";
import type { EtcdUnary } from "../replication/log-append.js";
import { SilentEndpoints } from "./silent-endpoints.js";

/** The gRPC paths of the etcd methods the lean client calls. */
const TXN_PATH = "/etcdserverpb.KV/Txn";
const KEEP_ALIVE_PATH = "/etcdserverpb.Lease/LeaseKeepAlive";
const AUTHENTICATE_PATH = "/etcdserverpb.Auth/Authenticate";

/** EtcdLeanClient sends etcd a member's frequent calls on node:http2 (the lean way of LogAppend, LogEnd, RecordPut and a lease's keep-alives); closed with the member. */
export interface EtcdLeanClient {
  /** txn sends a KV.Txn. */
  readonly txn: EtcdUnary;
  /** keepAlive sends one LeaseKeepAlive request on a stream of its own, which etcd answers once and ends. */
  readonly keepAlive: EtcdUnary;
  close(): void;
}

/**
 * etcdLeanClient is a lean client of etcd for a member's frequent calls:
 * the leader's appends, a standby's questions of the log's end, and every
 * member's lease keep-alives. One node:http2 connection per endpoint (the
 * relay's lean gRPC transport), with the member's TLS (etcd's CA, its
 * client certificate) and etcd's user, whose token it asks for with
 * Auth.Authenticate and asks again when etcd says it is no longer valid.
 * Each call goes to an endpoint at random, but not to one that is silent
 * (SilentEndpoints: a call to it ran out its deadline). A failure is
 * etcd3's error type (castGrpcError of its gRPC code and message), so that
 * attempts() sends again what may be the endpoint's fault.
 */
export function etcdLeanClient(options: Pick<IOptions, "hosts" | "credentials" | "auth">): EtcdLeanClient {
  const hosts = (typeof options.hosts === "string" ? [options.hosts] : (options.hosts ?? [])).map((h) => (/^https?:\/\//.test(h) ? h : `http://${h}`));
  const credentials = options.credentials;
  const tls = credentials && { ca: credentials.rootCertificate, cert: credentials.certChain, key: credentials.privateKey };
  const transports: LeanGrpcTransport[] = hosts.map((baseUrl) => createLeanGrpcTransport({ baseUrl, tls }));
  const endpoints = new SilentEndpoints(hosts.length);
  let token: Promise<string> | undefined;

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
  const once = async (path: string, host: number, request: Uint8Array, deadline: number, sent: { token?: Promise<string> }): Promise<Uint8Array> => {
    const left = () => Math.max(1, deadline - Date.now());
    sent.token = tokenFor(host, left());
    const headers = sent.token === undefined ? undefined : { token: await sent.token };
    return transports[host]!.unaryBytes(path, envelope(request), left(), headers);
  };

  const unary =
    (path: string): EtcdUnary =>
    async (request, callOptions: CallOptions) => {
      const deadline = callOptions.deadline instanceof Date ? callOptions.deadline.getTime() : Number(callOptions.deadline ?? Date.now() + 5_000);
      const host = endpoints.pick();
      const sentAt = performance.now();
      const sent: { token?: Promise<string> } = {};
      try {
        let answer: Uint8Array;
        try {
          answer = await once(path, host, request, deadline, sent);
        } catch (error) {
          const cast = etcdError(error);
          if (!(cast instanceof EtcdInvalidAuthTokenError)) throw cast;
          if (token === sent.token) token = undefined; // etcd forgot it (a restart, its TTL): a new one, once
          answer = await once(path, host, request, deadline, sent);
        }
        endpoints.answered(host, sentAt);
        return answer;
      } catch (error) {
        const cast = etcdError(error);
        if (cast instanceof GRPCDeadlineExceededError) endpoints.ranOut(host, sentAt); // etcd3's error classes keep the name "Error"
        throw cast;
      }
    };

  return {
    txn: unary(TXN_PATH),
    keepAlive: unary(KEEP_ALIVE_PATH),
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
