import { createHash, timingSafeEqual } from "node:crypto";
import { MetadataError, Reason } from "../core/index.js";
import { type AccessFiles, type AccessTokens, readAccessTokens } from "./token-file.js";

/**
 * ADMIN_METHODS are the calls that can drop other engines' keys: they need
 * an admin token. Every other MetadataService call and JSON route needs a
 * worker or an admin token.
 */
export const ADMIN_METHODS: ReadonlySet<string> = new Set([
  "Clear",
  "DeleteKeys",
  "DropRank",
  "ResetNamespace",
  "vllm.clear",
  "vllm.drop_rank",
  "vllm.reset",
  "sglang.clear",
  "sglang.delete_keys",
  "replication.Snapshot",
  "replication.Forget",
]);

/**
 * CLEAR_METHODS are the admin calls that drop keys but keep every rank and
 * its definition, which engines make themselves (vLLM's and SGLang's
 * clear, SGLang's delete_keys): a clear token may make them, besides every
 * worker call, so that a relay can pass them on without an admin token.
 */
const CLEAR_METHODS: ReadonlySet<string> = new Set(["Clear", "DeleteKeys", "vllm.clear", "sglang.clear", "sglang.delete_keys"]);

/**
 * ALWAYS_ADMIN_METHODS need an admin token whenever tokens are in force,
 * even without an admin file (then no token may call them): a snapshot is
 * every namespace's whole state, and holds a read transaction of the
 * leader's store while it streams.
 */
const ALWAYS_ADMIN_METHODS: ReadonlySet<string> = new Set(["replication.Snapshot"]);

/** TokenCounts says how many tokens a policy holds (never the tokens). */
export interface TokenCounts {
  worker: number;
  admin: number;
  clear: number;
}

/**
 * AccessPolicy decides, from a call's `authorization` header, whether it
 * may run. Tokens are kept only as SHA-256 digests and compared in
 * constant time, each presented token against every known one; they are
 * never logged. `reload` re-reads the files (SIGHUP).
 */
export class AccessPolicy {
  private worker: Buffer[] = [];
  private admin: Buffer[] = [];
  private clear: Buffer[] = [];

  /** The policy of `files`, with their tokens as `tokens` read them (read now when not given). */
  constructor(
    private readonly files: AccessFiles,
    tokens: AccessTokens = readAccessTokens(files),
  ) {
    this.use(tokens);
  }

  /** reload reads the token files again and returns the counts; when a file cannot be read or holds no token it throws, and the tokens stay as they were. */
  reload(): TokenCounts {
    return this.use(readAccessTokens(this.files));
  }

  private use({ worker, admin, clear }: AccessTokens): TokenCounts {
    this.worker = worker.map(digest);
    this.admin = admin.map(digest);
    this.clear = clear.map(digest);
    return { worker: worker.length, admin: admin.length, clear: clear.length };
  }

  /**
   * check throws UNAUTHENTICATED unless the call carries the token it needs
   * (`authorization: Bearer <token>`), and PERMISSION_DENIED for a worker
   * token on an admin method (a clear token on an admin method that is
   * not a CLEAR_METHOD). With anyTokenOnly (/metrics under
   * --metrics-auth), any known token is needed and enough.
   */
  check(method: string, authorization: string | undefined, anyTokenOnly = false): void {
    const token = bearerToken(authorization);
    const presented = token === undefined ? undefined : digest(token);
    if (presented !== undefined && matchesAny(presented, this.admin)) return;
    if (presented !== undefined && matchesAny(presented, this.clear)) {
      if (!ADMIN_METHODS.has(method) || CLEAR_METHODS.has(method)) return;
      throw new MetadataError(Reason.PERMISSION_DENIED, `${method} needs an admin token (--admin-token-file); this is a clear token`);
    }
    const isWorker = presented !== undefined && matchesAny(presented, this.worker);
    const adminCall = ADMIN_METHODS.has(method) && (this.files.adminTokenFile !== undefined || ALWAYS_ADMIN_METHODS.has(method));
    if (isWorker && adminCall) {
      throw new MetadataError(Reason.PERMISSION_DENIED, `${method} needs an admin token (--admin-token-file); this is a worker token`);
    }
    if (isWorker || (!adminCall && !anyTokenOnly && this.files.workerTokenFile === undefined)) return;
    throw new MetadataError(
      Reason.UNAUTHENTICATED,
      token === undefined ? `${method} needs a token: send the header authorization: Bearer <token>` : "the token is not known to this server",
    );
  }
}

/**
 * bearerToken is the token of an `authorization: Bearer <token>` header,
 * undefined for anything else. White space around the value is not part
 * of it (HTTP/1.1 strips it before we see the header, HTTP/2 does not), so
 * both protocols take the same headers.
 */
function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const match = /^[ \t]*Bearer +(\S+)[ \t]*$/i.exec(authorization);
  return match?.[1];
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

/** matchesAny compares against every known digest, without stopping at a match, so the time does not tell which or how many. */
function matchesAny(presented: Buffer, known: readonly Buffer[]): boolean {
  let found = false;
  for (const candidate of known) found = timingSafeEqual(presented, candidate) || found;
  return found;
}
