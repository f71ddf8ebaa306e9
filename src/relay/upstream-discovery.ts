import { promises as dns, type SrvRecord } from "node:dns";

/** SRV_FORM is an --upstream that names the members by a DNS SRV name (a headless Service's named port) instead of a list: srv+https://NAME. */
const SRV_FORM = /^srv\+(https?):\/\/([^/\s:]+)\/?$/;
/** REFRESH_MS is how often the SRV name is read again once it named members; FIRST_MS while it names none. */
const REFRESH_MS = 30_000;
const FIRST_MS = 2_000;

/** ResolveSrv reads the SRV records of a name (node:dns's, or a test's). */
export type ResolveSrv = (name: string) => Promise<SrvRecord[]>;

/** srvUpstream parses an --upstream of the SRV form (srv+https://_grpc._tcp.NAME): its scheme and its SRV name; undefined for a list of URLs. */
export function srvUpstream(upstream: string): { scheme: "http" | "https"; name: string } | undefined {
  const match = SRV_FORM.exec(upstream.trim());
  return match === null ? undefined : { scheme: match[1] as "http" | "https", name: match[2]! };
}

/**
 * UpstreamDiscovery finds a cluster's members by a DNS SRV name: each
 * record is a member at `scheme://target:port`, as it advertises itself
 * (Kubernetes names a headless Service's pods so: give the members
 * advertise URLs of their full names). It reads the name at once, every
 * FIRST_MS while it names no member, then every REFRESH_MS, and hands each
 * new set of members, sorted, to `changed`.
 */
export class UpstreamDiscovery {
  private last = "";
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly form: { scheme: "http" | "https"; name: string },
    private readonly changed: (urls: string[]) => void,
    private readonly resolveSrv: ResolveSrv = (name) => dns.resolveSrv(name),
  ) {}

  /** members reads the SRV name once: the members' URLs, sorted; [] when it names none or does not resolve. */
  async members(): Promise<string[]> {
    const records = await this.resolveSrv(this.form.name).catch(() => [] as SrvRecord[]);
    const urls = records.map(({ name, port }) => `${this.form.scheme}://${name.replace(/\.$/, "")}:${port}`);
    return [...new Set(urls)].sort();
  }

  /** run reads the name now and then on its schedule, until stop; its timer keeps no process alive. */
  run(): void {
    const read = async () => {
      const urls = await this.members();
      if (this.stopped) return;
      const key = urls.join(",");
      if (urls.length > 0 && key !== this.last) {
        this.last = key;
        this.changed(urls);
      }
      this.timer = setTimeout(read, urls.length > 0 ? REFRESH_MS : FIRST_MS);
      this.timer.unref();
    };
    void read();
  }

  /** stop ends the reads. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
