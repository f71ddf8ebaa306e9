import type { BodyReader } from "../../service/body-reader.js";
import type { LimitOptions } from "../../service/limit-options.js";
import { BodyBudget } from "./body-budget.js";
import { BodyPool } from "./body-pool.js";
import { type BodyStream, HeldBytes, lingerForBody, readBody, SlowReads } from "./read-body.js";

/** BodyLimits are the limits a reader reads bodies within (LimitOptions). */
export type BodyLimits = Pick<LimitOptions, "maxBufferedBytes" | "maxBufferedBytesPerConnection" | "requestTimeoutMs">;

/**
 * HttpBodyReader reads, for the edge, the bodies of node:http's and
 * node:http2's requests: all in one budget (BodyBudget), cut when they
 * arrive too slowly (SlowReads, --request-timeout), joined into buffers of
 * one pool that the next calls reuse.
 */
export class HttpBodyReader implements BodyReader {
  private readonly budget: BodyBudget;
  private readonly slowReads: SlowReads;
  private readonly pool = new BodyPool();

  constructor(limits: BodyLimits) {
    this.budget = new BodyBudget(limits.maxBufferedBytes, limits.maxBufferedBytesPerConnection);
    this.slowReads = new SlowReads(limits.requestTimeoutMs);
  }

  read(body: BodyStream, maxBytes: number, deadline: AbortSignal | undefined, pooled: boolean): Promise<HeldBytes> {
    return readBody(body, maxBytes, this.budget, deadline, this.slowReads, pooled ? this.pool : undefined);
  }

  linger(body: BodyStream): Promise<void> {
    return lingerForBody(body);
  }

  holder(body: BodyStream): HeldBytes {
    return new HeldBytes(Buffer.alloc(0), this.budget, body.stream?.session ?? body.socket);
  }

  close(): void {
    this.slowReads.close();
  }
}
