/**
 * PeerTls is how a cluster member reaches another over TLS (a standby
 * forwarding a call to the leader, or asking it for a snapshot): it trusts
 * `ca` (the members' --tls-client-ca; undefined: the system's CAs) and
 * presents its own certificate, which passes the other member's mTLS
 * check when one CA signs the members' certificates. PEM.
 */
export interface PeerTls {
  readonly ca?: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}
