import { isIP } from "node:net";

/** noSniForIp is the TLS option that sends no server name for an IP host (RFC 6066 allows none; Node warns, DEP0123); {} for a name. */
export function noSniForIp(url: string): { servername?: string } {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  return isIP(host) === 0 ? {} : { servername: "" };
}

/**
 * PeerTls is how a cluster member reaches another over TLS (a standby
 * forwarding a call to the leader, or asking a member for a snapshot): it trusts
 * `ca` (the members' --tls-client-ca; undefined: the system's CAs) and
 * presents its own certificate, which passes the other member's mTLS
 * check when one CA signs the members' certificates. PEM.
 */
export interface PeerTls {
  readonly ca?: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}
