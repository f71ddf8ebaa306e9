import { setTimeout as sleep } from "node:timers/promises";
import { createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LeanSession } from "../client/lean-session.js";
import { type ClientTls, withHeader } from "../client/metadata-client.js";

/** RETRY_MS is how long a watch waits to open again after its stream ended or failed (the server down, restarting or draining). */
const RETRY_MS = 500;

/** WATCH_PING_MS is how often a health watch's quiet connection is PINGed, and how long an answer may take: a server paused or cut off counts as gone within twice as long. */
const WATCH_PING_MS = 1_000;

/**
 * HealthWatch follows one server's health of one service over
 * grpc.health.v1's Watch: the server sends its status, then each change,
 * so a relay that waits for calls costs its servers nothing a second
 * (polling with Check cost each server a call per relay every probe). It
 * counts as not serving while its stream is down (refused, ended, or its
 * connection's PINGs unanswered, which the transport closes), and opens
 * it again RETRY_MS later. `onChange` hears every change of `serving`,
 * and every end of the stream.
 */
export class HealthWatch {
  private up = false;
  private readonly abort = new AbortController();

  constructor(
    transport: Transport,
    service: string,
    private readonly onChange: () => void,
  ) {
    void this.run(createClient(Health, transport), service);
  }

  /** serving is true while the server's last word on the service, on a stream still open, was SERVING. */
  get serving(): boolean {
    return this.up;
  }

  /** close ends the stream and stops opening it again. */
  close(): void {
    this.abort.abort();
  }

  private async run(health: ReturnType<typeof createClient<typeof Health>>, service: string): Promise<void> {
    const { signal } = this.abort;
    while (!signal.aborted) {
      try {
        for await (const { status } of health.watch({ service }, { signal })) this.set(status === ServingStatus.SERVING);
      } catch {
        // Refused, reset, or closed for unanswered PINGs: not serving until a stream says otherwise.
      }
      this.ended();
      await sleep(RETRY_MS, undefined, { signal }).catch(() => undefined);
    }
  }

  private set(up: boolean): void {
    if (up === this.up || this.abort.signal.aborted) return;
    this.up = up;
    this.onChange();
  }

  /** ended notes that the stream ended: not serving, told even when it was not before (a call answered meanwhile may have said otherwise). */
  private ended(): void {
    if (this.abort.signal.aborted) return;
    this.up = false;
    this.onChange();
  }
}

/**
 * ServerWatch watches one server's health on a connection of its own,
 * PINGed every WATCH_PING_MS: MetadataService (SERVING only on a cluster's
 * leader) and, when reads are spread, "" (loaded and caught up). Its own,
 * so that a server that stalls a second loses the relay's watch, not the
 * calls in flight on the calls' connection (PINGed every 5 s).
 */
export class ServerWatch {
  readonly leads: HealthWatch;
  readonly caughtUp: HealthWatch | undefined;
  private readonly session: LeanSession;

  constructor(url: string, tls: ClientTls | undefined, header: Readonly<Record<string, string>>, reads: boolean, onChange: () => void) {
    this.session = new LeanSession(url, tls, WATCH_PING_MS);
    const transport = createGrpcTransport({ baseUrl: url, sessionManager: this.session, interceptors: [withHeader(header)] });
    this.leads = new HealthWatch(transport, MetadataService.typeName, onChange);
    this.caughtUp = reads ? new HealthWatch(transport, "", onChange) : undefined;
  }

  /** silent is true while the server has left a PING of the watch unanswered and not been heard since (LeanSession.silent). */
  get silent(): boolean {
    return this.session.silent;
  }

  close(): void {
    this.leads.close();
    this.caughtUp?.close();
    this.session.close();
  }
}
