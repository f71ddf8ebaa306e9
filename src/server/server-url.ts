/** serverUrl is the base URL of a server listening on host and port, e.g. http://127.0.0.1:18000 (an IPv6 host in brackets). */
export function serverUrl(host: string, port: number, tls: boolean): string {
  return `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
