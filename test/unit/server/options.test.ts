import { readFileSync } from "node:fs";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { BatchAllocateRequestSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { parseDuration } from "../../../src/cli/duration.js";
import { RELAY } from "../../../src/cli/relay-command.js";
import { defaultServerOptions, envName, OPTIONS, parseServerOptions, usage } from "../../../src/cli/serve-options.js";
import { MetadataState } from "../../../src/core/state.js";
import { relayOptions } from "../../../src/relay/relay-options.js";
import { shardEtcdEndpoints } from "../../../src/replication/cluster-options.js";

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["60s", 60_000],
    ["10m", 600_000],
    ["1h", 3_600_000],
    ["1.5s", 1_500],
    ["250", 250],
  ])("reads %s as %i ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["", "5x", "-1s", "s"])("rejects %j", (text) => expect(() => parseDuration(text)).toThrow(/not a duration/));
});

describe("parseServerOptions", () => {
  it("defaults to 127.0.0.1:18000 with the documented TTLs", () => {
    expect(parseServerOptions([], {})).toEqual(defaultServerOptions);
    expect(defaultServerOptions).toMatchObject({ host: "127.0.0.1", port: 18000, reservationTtlMs: 60_000, readLeaseTtlMs: 10_000, incompleteTtlMs: 600_000 });
  });

  it("evicts prefix-aware between the watermarks 0.90 and 0.95 unless told otherwise", () => {
    expect(parseServerOptions([], {})).toMatchObject({ eviction: "prefix", evictHighWatermark: 0.95, evictLowWatermark: 0.9 });
    const options = parseServerOptions(["--eviction", "lru", "--evict-high-watermark", "1", "--evict-low-watermark", ".5"], {});
    expect(options).toMatchObject({ eviction: "lru", evictHighWatermark: 1, evictLowWatermark: 0.5 });
  });

  it("reads HF3FS_METADATA_* variables, and flags win over them", () => {
    const env = { [envName("port")]: "18001", [envName("reservation-ttl")]: "5s", [envName("in-memory")]: "true" };
    expect(parseServerOptions([], env)).toMatchObject({ port: 18001, reservationTtlMs: 5_000, inMemory: true });
    expect(parseServerOptions(["--port", "18002", "--reservation-ttl", "500ms"], env)).toMatchObject({ port: 18002, reservationTtlMs: 500 });
  });

  it("rejects unknown flags and malformed values", () => {
    expect(() => parseServerOptions(["--nope"], {})).toThrow();
    expect(() => parseServerOptions(["--port", "x"], {})).toThrow(/whole number/);
    expect(() => parseServerOptions(["--read-lease-ttl", "soon"], {})).toThrow(/read-lease-ttl/);
    expect(() => parseServerOptions(["--port", "70000"], {})).toThrow(/65535/);
    // The vLLM namespace is one the core takes (the rule of core/options.ts, which the option checks use before the port is bound).
    expect(() => parseServerOptions(["--vllm-namespace", "a\u001fb"], {})).toThrow(/--vllm-namespace: namespace must not hold U\+001F/);
    expect(() => parseServerOptions(["--vllm-namespace", "x".repeat(40), "--max-key-bytes", "32"], {})).toThrow(/--vllm-namespace: .*at most 32 bytes/);
    expect(parseServerOptions(["--vllm-namespace", ""], {}).vllmNamespace).toBe("");
    expect(() => parseServerOptions(["--max-key-bytes", "1025"], {})).toThrow(/--max-key-bytes must be at most 1024/);
    expect(() => parseServerOptions(["--max-ranks-per-namespace", "32768"], {})).toThrow(/--max-ranks-per-namespace must be at most 32767, got 32768/);
    expect(() => parseServerOptions(["--eviction", "fifo"], {})).toThrow(/--eviction takes prefix or lru, got "fifo"/);
    expect(() => parseServerOptions(["--evict-high-watermark", "1.5"], {})).toThrow(/fraction from 0 to 1/);
    expect(() => parseServerOptions(["--evict-low-watermark", "ninety"], {})).toThrow(/fraction from 0 to 1/);
    expect(() => parseServerOptions(["--evict-high-watermark", "0.8"], {})).toThrow(
      /--evict-low-watermark \(0.9\) must be above 0 and at most --evict-high-watermark \(0.8\)/,
    );
    expect(() => parseServerOptions(["--evict-low-watermark", "0"], {})).toThrow(/must be above 0/);
    expect(parseServerOptions(["--max-key-bytes", "1024"], {}).maxKeyBytes).toBe(1024);
  });
});

describe("the rules of each concern's options", () => {
  it("name a core limit by its flag on the command line, and by its field to a library's caller", () => {
    expect(() => parseServerOptions(["--max-namespaces", "0"], {})).toThrow(/^--max-namespaces must be at least 1$/);
    expect(() => new MetadataState(() => 0, { maxNamespaces: 0 })).toThrow(/^maxNamespaces must be at least 1$/);
    expect(() => new MetadataState(() => 0, { evictLowWatermark: 0.99 })).toThrow(/^evictLowWatermark \(0.99\) must be above 0 and at most evictHighWatermark/);
  });

  it("refuse a value that is none of an option's choices, naming them", () => {
    expect(() => parseServerOptions(["--log-level", "loud"], {})).toThrow('--log-level takes fatal, error, warn, info, debug, trace or silent, got "loud"');
    expect(parseServerOptions(["--log-level", "silent"], {}).logLevel).toBe("silent");
  });

  it("refuse durations of no time where a connection's timer needs one", () => {
    for (const flag of ["--http2-keepalive", "--request-timeout", "--idle-timeout"]) {
      expect(() => parseServerOptions([flag, "0s"], {})).toThrow(new RegExp(`^${flag} must be longer than 0$`));
    }
  });
});

describe("the options of high availability", () => {
  const etcd = ["--etcd-endpoints", "http://127.0.0.1:2379,http://10.0.0.2:2379"];
  const tlsEtcd = ["--etcd-endpoints", "https://127.0.0.1:2379,https://10.0.0.2:2379"];

  it("are off by default, and read from flags or HF3FS_METADATA_* variables", () => {
    expect(defaultServerOptions).toMatchObject({ etcdEndpoints: "", clusterName: "default", advertiseUrl: "", leaderLeaseMs: 2_000 });
    expect(parseServerOptions([...etcd, "--cluster-name", "kv-a", "--leader-lease", "3s"], {})).toMatchObject({
      etcdEndpoints: "http://127.0.0.1:2379,http://10.0.0.2:2379",
      clusterName: "kv-a",
      leaderLeaseMs: 3_000,
    });
    expect(parseServerOptions([], { [envName("etcd-endpoints")]: "http://e:2379", [envName("advertise-url")]: "http://10.0.0.2:18000" })).toMatchObject({
      etcdEndpoints: "http://e:2379",
      advertiseUrl: "http://10.0.0.2:18000",
    });
  });

  it.each([
    [["--etcd-endpoints", "127.0.0.1:2379"], /--etcd-endpoints takes URLs like http:\/\/127\.0\.0\.1:2379, got "127\.0\.0\.1:2379"/],
    [[...etcd, "--in-memory"], /--etcd-endpoints needs the durable store/],
    [[...etcd, "--auth-token-file", "/t"], /needs --admin-token-file too: standbys fetch snapshots from the other members with an admin token/],
    [[...etcd, "--cluster-name", "a/b"], /--cluster-name takes 1 to 64 letters/],
    [[...etcd, "--advertise-url", "10.0.0.2:18000"], /--advertise-url takes a URL/],
    [[...etcd, "--leader-lease", "1500ms"], /--leader-lease must be whole seconds, at least 1s/],
    [[...etcd, "--leader-lease", "0s"], /--leader-lease must be whole seconds, at least 1s/],
    [["--etcd-ca", "ca.pem"], /--etcd-ca is for a member of a cluster: give --etcd-endpoints too/],
    [["--etcd-password-file", "pw"], /--etcd-password-file is for a member of a cluster/],
    [[...etcd, "--etcd-ca", "ca.pem"], /give https:\/\/ --etcd-endpoints/],
    [[...tlsEtcd, "--etcd-cert", "c.pem", "--etcd-ca", "ca.pem"], /--etcd-cert and --etcd-key go together/],
    [[...tlsEtcd, "--etcd-cert", "c.pem", "--etcd-key", "k.pem"], /--etcd-cert needs --etcd-ca/],
    [[...tlsEtcd, "--etcd-user", "root"], /--etcd-user and --etcd-password-file go together/],
  ])("refuse %j", (args, message) => expect(() => parseServerOptions(args, {})).toThrow(message));

  it("take etcd's TLS and auth options with https:// endpoints", () => {
    const tls = ["--etcd-ca", "ca.pem", "--etcd-cert", "c.pem", "--etcd-key", "k.pem", "--etcd-user", "root", "--etcd-password-file", "pw"];
    expect(parseServerOptions([...tlsEtcd, ...tls], {})).toMatchObject({
      etcdCa: "ca.pem",
      etcdCert: "c.pem",
      etcdKey: "k.pem",
      etcdUser: "root",
      etcdPasswordFile: "pw",
    });
  });
});

describe("the body limit", () => {
  /** largestAllocate is the largest BatchAllocate the key limits allow, with multibyte keys of exactly maxKeyBytes. */
  function largestAllocate(maxKeysPerCall: number, maxKeyBytes: number) {
    const key = (i: number) => `${`${i}`.padStart(maxKeyBytes - 4 * 4, "0")}🔑🔑🔑🔑`;
    const keys = Array.from({ length: maxKeysPerCall }, (_, i) => key(i));
    return { namespace: key(-1), rank: 4_294_967_295, keys, prefixKeys: keys };
  }

  it.each([
    [[], 65_536, 1_024],
    [["--max-keys-per-call", "300", "--max-key-bytes", "1000"], 300, 1_000],
  ] as const)("takes the largest call the key limits allow, over gRPC and vLLM's JSON (%j)", (args, keysPerCall, keyBytes) => {
    const options = parseServerOptions([...args], {});
    // Encoding 130 MB here would be slow: the size per key is the same at any count, so measure 300 keys and scale.
    const sample = largestAllocate(300, keyBytes);
    const grpcPerKey = (toBinary(BatchAllocateRequestSchema, create(BatchAllocateRequestSchema, sample)).length + 5) / 300;
    const vllm = JSON.stringify({ namespace: sample.namespace, rank: sample.rank, keys: sample.keys.map((k, i) => [k, sample.prefixKeys[i]]) });
    const jsonPerKey = Buffer.byteLength(vllm) / 300;
    expect(Math.ceil(grpcPerKey * keysPerCall)).toBeLessThanOrEqual(options.maxBodyBytes);
    expect(Math.ceil(jsonPerKey * keysPerCall)).toBeLessThanOrEqual(options.maxBodyBytes);
  });

  it("is the one given when given", () => {
    expect(parseServerOptions(["--max-body-bytes", "1000"], {}).maxBodyBytes).toBe(1_000);
  });
});

describe("the bounds of unfinished request bodies", () => {
  it("default to one body at the limit per connection and four in all, and must hold one body", () => {
    expect(parseServerOptions(["--max-body-bytes", "1000"], {})).toMatchObject({ maxBufferedBytesPerConnection: 1_005, maxBufferedBytes: 4_020 });
    expect(parseServerOptions(["--max-body-bytes", "1000", "--max-buffered-bytes-per-connection", "9000"], {}).maxBufferedBytes).toBe(9_000);
    expect(() => parseServerOptions(["--max-body-bytes", "1000", "--max-buffered-bytes-per-connection", "1004"], {})).toThrow(/must hold one body/);
    expect(() => parseServerOptions(["--max-body-bytes", "1000", "--max-buffered-bytes", "1004"], {})).toThrow(
      /--max-buffered-bytes \(1004\) must be at least/,
    );
  });

  it("bound the unsent answers as well, unless --max-unsent-bytes is given", () => {
    expect(parseServerOptions(["--max-body-bytes", "1000"], {}).maxUnsentBytes).toBe(4_020);
    expect(parseServerOptions(["--max-buffered-bytes", "600000000"], {}).maxUnsentBytes).toBe(600_000_000);
    expect(parseServerOptions(["--max-unsent-bytes", "5000"], {}).maxUnsentBytes).toBe(5_000);
    expect(relayOptions({ upstream: "http://127.0.0.1:1", maxBodyBytes: 1000 }).maxUnsentBytes).toBe(4_020);
    expect(() => parseServerOptions(["--max-unsent-bytes", "0"], {})).toThrow(/--max-unsent-bytes must be at least 1/);
  });

  it("and the other counts must be at least 1", () => {
    for (const flag of ["--max-keys-per-call", "--max-ranks-per-namespace", "--max-namespaces"]) {
      expect(() => parseServerOptions([flag, "0"], {})).toThrow(new RegExp(`${flag} must be at least 1`));
    }
  });
});

describe("--shards and --shard", () => {
  it("take a shard below the count, and make the state hand out its part of the pages", () => {
    expect(parseServerOptions(["--shards", "3", "--shard", "2"], {})).toMatchObject({ shards: 3, shard: 2 });
    expect(() => parseServerOptions(["--shards", "2", "--shard", "2"], {})).toThrow("--shard must be below --shards (2): shards count from 0, got 2");
    expect(() => parseServerOptions(["--shards", "0"], {})).toThrow("--shards must be at least 1");
    expect(parseServerOptions([], {})).toMatchObject({ shards: 1, shard: 0 });
  });

  it("--member-index gives a member the shard of its index mod --shards, so a StatefulSet of 3 × S pods makes S shards of 3", () => {
    const member = ["--data-dir", "d", "--etcd-endpoints", "http://e1:2379", "--shards", "2"];
    // As Kubernetes gives it: the pod's index in the environment, from its label apps.kubernetes.io/pod-index.
    const shards = [0, 1, 2, 3, 4, 5].map((index) => parseServerOptions(member, { HF3FS_METADATA_MEMBER_INDEX: String(index) }).shard);
    expect(shards).toEqual([0, 1, 0, 1, 0, 1]);
    expect(parseServerOptions(["--data-dir", "d", "--etcd-endpoints", "http://e1:2379", "--member-index", "2"], {}).shard).toBe(0);
    expect(() => parseServerOptions([...member, "--member-index", "1", "--shard", "1"], {})).toThrow(
      "give --shard or --member-index, not both: a member's shard is its index mod --shards",
    );
    expect(() => parseServerOptions(["--member-index", "1"], {})).toThrow("--member-index is for a member of a cluster: give --etcd-endpoints too");
    expect(() => parseServerOptions(member, { HF3FS_METADATA_MEMBER_INDEX: "pod-1" })).toThrow("--member-index must be a whole number");
    // Its shard's etcd, when the shards have their own, is checked against the shard it gives.
    const own = [...member, "--shard-etcd-endpoints", "http://e0:2379;http://e1:2379"];
    expect(parseServerOptions([...own, "--member-index", "3"], {}).shard).toBe(1);
    expect(() => parseServerOptions([...own, "--member-index", "4"], {})).toThrow("--shard-etcd-endpoints gives shard 0 the etcd endpoints http://e0:2379");
  });

  it("--shard-etcd-endpoints names each shard's etcd, this member's shard's being its own", () => {
    const member = ["--data-dir", "d", "--etcd-endpoints", "http://e1:2379", "--shards", "2", "--shard", "1"];
    const given = parseServerOptions([...member, "--shard-etcd-endpoints", "http://e0:2379,http://e0b:2379; http://e1:2379"], {});
    expect(shardEtcdEndpoints(given)).toEqual(["http://e0:2379,http://e0b:2379", "http://e1:2379"]);
    expect(shardEtcdEndpoints(parseServerOptions(member, {}))).toEqual(["http://e1:2379", "http://e1:2379"]);
    expect(() => parseServerOptions([...member, "--shard-etcd-endpoints", "http://e0:2379"], {})).toThrow(
      '--shard-etcd-endpoints names 1 shards\' etcd endpoints (";" between shards), --shards is 2',
    );
    expect(() => parseServerOptions([...member, "--shard-etcd-endpoints", "http://e0:2379;http://e2:2379"], {})).toThrow(
      "--shard-etcd-endpoints gives shard 1 the etcd endpoints http://e2:2379, but this member of it runs on --etcd-endpoints http://e1:2379",
    );
    expect(() => parseServerOptions([...member, "--shard-etcd-endpoints", "http://e0:2379;e1"], {})).toThrow(/takes URLs like/);
    expect(() => parseServerOptions(["--shard-etcd-endpoints", "http://e0:2379"], {})).toThrow(
      "--shard-etcd-endpoints is for a member of a cluster: give --etcd-endpoints too",
    );
  });
});

describe("the options table of docs/operating.md", () => {
  it("lists every option of serve", () => {
    const readme = readFileSync(new URL("../../../docs/operating.md", import.meta.url), "utf8");
    // A row of the table: a line starting with "| " whose first cell names the flag.
    const missing = OPTIONS.filter((o) => !new RegExp(`^\\| [^|]*\`--${o.flag}\``, "m").test(readme)).map((o) => o.flag);
    expect(missing).toEqual([]);
  });
});

describe("the --help of serve and relay", () => {
  it.each([
    ["serve", usage()],
    ["relay", RELAY.usage()],
  ])("%s gives each option's default once, in its own words where the value alone does not say it", (_, text) => {
    const helps = text.split("\n").filter((line) => line.startsWith("      "));
    expect(helps.length).toBeGreaterThan(20);
    for (const help of helps) expect(help.match(/\(default/g), help).toHaveLength(1);
  });
});
