import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseDuration } from "../../src/cli/duration.js";
import { parseServerOptions } from "../../src/cli/serve-options.js";
import { makeCertificates } from "../support/certificates.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { tempDir } from "../support/temp-dir.js";

const missing = lacking("the members' probe over TLS", "openssl");

// deploy/kubernetes/ checked offline: every object against the Kubernetes API's schemas (kubernetes-models:
// its validate() for values and formats, its TypeScript types through tsc for unknown or misspelt
// fields, which the schemas let through), then what must hold between them and the server.
const ROOT = new URL("../../", import.meta.url).pathname;
const DIR = join(ROOT, "deploy/kubernetes");

// biome-ignore lint/suspicious/noExplicitAny: manifests are checked against the API's schemas below, then read loosely
type Manifest = { apiVersion: string; kind: string; metadata: { name: string }; file: string } & Record<string, any>;

const files = readdirSync(DIR).filter((f) => f.endsWith(".yaml"));
const kustomization = parseAllDocuments(readFileSync(join(DIR, "kustomization.yaml"), "utf8"))[0]!.toJS() as { resources: string[] };
const objects: Manifest[] = files
  .filter((f) => f !== "kustomization.yaml")
  .flatMap((file) => parseAllDocuments(readFileSync(join(DIR, file), "utf8")).map((doc) => ({ ...doc.toJS(), file }) as Manifest));
const one = (kind: string, name?: string) => objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name))!;
/** examples are the objects of deploy/kubernetes/examples/: engines with their relay in their pod, and certificates by cert-manager. */
const EXAMPLES = join(DIR, "examples");
const examples: Manifest[] = readdirSync(EXAMPLES)
  .filter((f) => f.endsWith(".yaml"))
  .flatMap((file) => parseAllDocuments(readFileSync(join(EXAMPLES, file), "utf8")).map((doc) => ({ ...doc.toJS(), file: `examples/${file}` }) as Manifest));
const modulePath = (o: Manifest) =>
  o.apiVersion.startsWith("cert-manager.io/") ? `@kubernetes-models/cert-manager/${o.apiVersion}/${o.kind}` : `kubernetes-models/${o.apiVersion}/${o.kind}`;
/** engines are the example engine Deployments, each with its relay as a native sidecar. */
const engines = examples.filter((o) => o.kind === "Deployment");
/** relayOf is an engine pod's relay: its init container that keeps running. */
const relayOf = (engine: Manifest) => engine.spec.template.spec.initContainers[0];
const work = mkdtempSync(join(tmpdir(), "hf3fs-metadata-kubernetes-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** withoutFile is a manifest as Kubernetes gets it. */
function withoutFile({ file: _, ...object }: Manifest): Record<string, unknown> {
  return object;
}

/** typeCheck runs tsc on each object given as a literal of its kubernetes-models interface; it returns tsc's output. */
function typeCheck(named: Record<string, Manifest[]>): string {
  for (const [name, list] of Object.entries(named)) {
    const lines = list.map(
      (o, i) => `import type { I${o.kind} as T${i} } from "${modulePath(o)}";\nexport const o${i}: T${i} = ${JSON.stringify(withoutFile(o))};`,
    );
    writeFileSync(join(work, `${name}.ts`), `${lines.join("\n")}\n`);
  }
  const tsconfig = {
    compilerOptions: {
      module: "NodeNext",
      moduleResolution: "NodeNext",
      target: "ES2022",
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: [],
      typeRoots: [],
    },
    files: Object.keys(named).map((name) => `${name}.ts`),
  };
  writeFileSync(join(work, "tsconfig.json"), JSON.stringify(tsconfig));
  // Resolved from the checkout's node_modules, where kubernetes-models is.
  writeFileSync(join(work, "package.json"), JSON.stringify({ type: "module" }));
  if (!existsSync(join(work, "node_modules"))) symlinkSync(join(ROOT, "node_modules"), join(work, "node_modules"));
  const tsc = spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", work], { encoding: "utf8" });
  return tsc.stdout + tsc.stderr;
}

/**
 * srvUpstreamOf is the --upstream a relay must give to find the members by DNS: the SRV name of the
 * headless Service's port, whose records Kubernetes makes of each member's full name and port, which
 * must be what the member advertises (a relay follows a leader only among the members it found).
 */
function srvUpstreamOf(set: Manifest): string {
  const service = one("Service", set.spec.serviceName);
  const member = set.spec.template.spec.containers[0];
  const advertise = member.env.find((e: { name: string }) => e.name === "HF3FS_METADATA_ADVERTISE_URL").value as string;
  const port = service.spec.ports[0];
  expect(port.targetPort).toBe(member.ports[0].name);
  const url = new URL(advertise.replace("$(POD_NAME)", "pod").replace("$(POD_NAMESPACE)", "ns"));
  expect([url.hostname, url.port]).toEqual([`pod.${set.spec.serviceName}.ns.svc.cluster.local`, String(port.port)]);
  return `srv+${url.protocol.slice(0, -1)}://_${port.name}._tcp.${set.spec.serviceName}.$(POD_NAMESPACE).svc.cluster.local`;
}

/** flagValue is the value after `flag` in a container's args. */
function flagValue(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
}

describe("the Kubernetes manifests", () => {
  it("are every file of the kustomization, and each object is valid against the API's schemas", async () => {
    expect([...kustomization.resources].sort()).toEqual(files.filter((f) => f !== "kustomization.yaml").sort());
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      "ConfigMap/hf3fs-metadata-config",
      "DaemonSet/hf3fs-metadata-relay",
      "PodDisruptionBudget/hf3fs-metadata",
      "Secret/hf3fs-metadata-etcd-tls",
      "Secret/hf3fs-metadata-relay-tls",
      "Secret/hf3fs-metadata-tls",
      "Secret/hf3fs-metadata-tokens",
      "Service/hf3fs-metadata",
      "Service/hf3fs-metadata-members",
      "StatefulSet/hf3fs-metadata",
    ]);
    expect(examples.map((o) => `${o.file}: ${o.kind}/${o.metadata.name}`).sort()).toEqual([
      "examples/certificates.yaml: Certificate/hf3fs-metadata-ca",
      "examples/certificates.yaml: Certificate/hf3fs-metadata-members",
      "examples/certificates.yaml: Certificate/hf3fs-metadata-relay",
      "examples/certificates.yaml: Issuer/hf3fs-metadata-ca",
      "examples/certificates.yaml: Issuer/hf3fs-metadata-selfsigned",
      "examples/sglang-engine.yaml: ConfigMap/sglang-qwen3-14b-hf3fs",
      "examples/sglang-engine.yaml: Deployment/sglang-qwen3-14b",
      "examples/vllm-engine.yaml: Deployment/vllm-llama-3-8b",
    ]);
    for (const object of [...objects, ...examples]) {
      const model = (await import(modulePath(object))) as Record<string, new (o: unknown) => { validate(): void }>;
      expect(() => new model[object.kind]!(withoutFile(object)).validate(), `${object.file}: ${object.kind}`).not.toThrow();
    }
  });

  it("have no unknown field (tsc on each object as its API type), and a misspelt field is caught", () => {
    const misspelt = structuredClone(one("StatefulSet"));
    misspelt.spec.template.spec.containers[0].imagePullPolicyy = "IfNotPresent";
    const output = typeCheck({ manifests: objects, examples, misspelt: [misspelt] });
    const errors = output.split("\n").filter((line) => line.includes("error TS"));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/\/misspelt\.ts\(.*imagePullPolicyy/);
  }, 60_000);

  it("give each member its volume at the data dir, its DNS name as advertise URL, and a grace period longer than the drain", () => {
    const set = one("StatefulSet");
    const pod = set.spec.template.spec;
    const server = pod.containers[0];
    const dataDir = flagValue(server.args, "--data-dir");
    const claim = set.spec.volumeClaimTemplates[0].metadata.name;
    expect(server.volumeMounts).toContainEqual({ name: claim, mountPath: dataDir });
    // The image declares the same directory as its volume.
    expect(readFileSync(join(ROOT, "deploy/container/Containerfile"), "utf8")).toContain(`VOLUME ${dataDir}\n`);
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(parseDuration(flagValue(server.args, "--shutdown-timeout")!));
    const env = server.env as { name: string; value?: string }[];
    const advertise = env.find((e) => e.name === "HF3FS_METADATA_ADVERTISE_URL")!;
    // https: the members serve TLS only (mTLS), so tokens never cross the pod network in clear.
    expect(advertise.value).toBe(`https://$(POD_NAME).${set.spec.serviceName}.$(POD_NAMESPACE).svc.cluster.local:${server.ports[0].containerPort}`);
    expect(["--tls-cert", "--tls-key", "--tls-client-ca"].map((flag) => flagValue(server.args, flag) !== undefined)).toEqual([true, true, true]);
    // Kubernetes expands $(VAR) only from variables defined before.
    expect(env.findIndex((e) => e.name === "POD_NAME")).toBeLessThan(env.indexOf(advertise));
    const members = one("Service", set.spec.serviceName);
    expect(members.spec).toMatchObject({ clusterIP: "None", publishNotReadyAddresses: true, selector: set.spec.template.metadata.labels });
    expect(one("Service", "hf3fs-metadata").spec.selector).toEqual(set.spec.template.metadata.labels);
    expect(one("PodDisruptionBudget").spec.selector.matchLabels).toEqual(set.spec.template.metadata.labels);
    expect(one("DaemonSet").spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(
      parseDuration(flagValue(one("DaemonSet").spec.template.spec.containers[0].args, "--shutdown-timeout")!),
    );
  });

  it("make a shard of every 3 members: the replicas are 3 per shard of the config, and pod i serves shard i mod the shards", () => {
    const set = one("StatefulSet");
    const member = set.spec.template.spec.containers[0];
    const config = one("ConfigMap").data as Record<string, string>;
    expect(set.spec.replicas).toBe(3 * Number(config.shards));
    type Env = { name: string; value?: string; valueFrom?: { configMapKeyRef?: { key: string }; fieldRef?: { fieldPath: string } } };
    /** envOf is the member's environment as the kubelet makes it for the pod of `index`, with `shards` in the ConfigMap. */
    const envOf = (index: number, shards: string) =>
      Object.fromEntries(
        (member.env as Env[]).map(({ name, value, valueFrom }) => {
          const key = valueFrom?.configMapKeyRef?.key;
          if (key !== undefined) return [name, key === "shards" ? shards : config[key]];
          if (valueFrom?.fieldRef?.fieldPath === "metadata.labels['apps.kubernetes.io/pod-index']") return [name, String(index)];
          return [name, value ?? "pod"];
        }),
      );
    const shardsOf = (shards: string, pods: number) =>
      Array.from({ length: pods }, (_, index) => parseServerOptions(member.args.slice(1), envOf(index, shards))).map((o) => [o.shards, o.shard]);
    expect(shardsOf(config.shards!, set.spec.replicas)).toEqual([
      [1, 0],
      [1, 0],
      [1, 0],
    ]);
    // Two shards: 6 replicas, 3 members in each.
    expect(shardsOf("2", 6).map(([, shard]) => shard)).toEqual([0, 1, 0, 1, 0, 1]);
  });

  it("run the relay on each engine node's 127.0.0.1:18000, upstream of every member by its advertise URL, upgraded beside the old one", () => {
    const set = one("StatefulSet");
    const pod = one("DaemonSet").spec.template.spec;
    const relay = pod.containers[0];
    expect(pod).toMatchObject({ hostNetwork: true, dnsPolicy: "ClusterFirstWithHostNet" });
    expect(relay.args[0]).toBe("relay");
    expect([flagValue(relay.args, "--host"), flagValue(relay.args, "--port")]).toEqual(["127.0.0.1", "18000"]);
    expect(flagValue(relay.args, "--upstream")).toBe(srvUpstreamOf(set));
    expect(relay.env).toContainEqual({ name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } });
    // The kubelet's probes reach the pod's IP, not the node's 127.0.0.1: the relay's probe runs inside.
    expect(relay.readinessProbe.exec.command).toEqual(["hf3fs-metadata", "health", "--server", "http://127.0.0.1:18000"]);
    // An upgrade surges: the new relay waits for the port at least as long as the old pod may take to be found ready beside
    // it (its probe), deleted and drained (its grace period), so it does not give up while the old one still holds it.
    expect(one("DaemonSet").spec.updateStrategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    const waitsMs = parseDuration(flagValue(relay.args, "--port-wait")!);
    expect(waitsMs).toBeGreaterThan((pod.terminationGracePeriodSeconds + relay.readinessProbe.periodSeconds + relay.readinessProbe.timeoutSeconds) * 1000);
  });

  it("refer only to Secret and ConfigMap keys that exist, and every file an option names is mounted", () => {
    const secrets = new Map(objects.filter((o) => o.kind === "Secret").map((s) => [s.metadata.name, Object.keys(s.stringData)]));
    const config = Object.keys(one("ConfigMap").data);
    for (const [workload, container] of [
      [one("StatefulSet"), one("StatefulSet").spec.template.spec.containers[0]],
      [one("DaemonSet"), one("DaemonSet").spec.template.spec.containers[0]],
      ...engines.map((engine) => [engine, relayOf(engine)]),
    ] as [Manifest, Manifest][]) {
      const pod = workload.spec.template.spec;
      const mounted = new Map<string, string[]>();
      for (const volume of pod.volumes.filter((v: { secret?: unknown }) => v.secret !== undefined)) {
        const keys = secrets.get(volume.secret.secretName);
        expect(keys, `${workload.kind}: ${volume.secret.secretName}`).toBeDefined();
        const items = (volume.secret.items ?? keys!.map((key: string) => ({ key, path: key }))) as { key: string; path: string }[];
        for (const item of items) expect(keys).toContain(item.key);
        const mount = container.volumeMounts.find((m: { name: string }) => m.name === volume.name);
        if (mount === undefined) continue; // another container's
        // A Secret of type kubernetes.io/tls holds ca.crt, tls.crt and tls.key (cert-manager writes all three).
        mounted.set(
          mount.mountPath,
          items.map((item) => item.path),
        );
      }
      const probe = (container.readinessProbe?.exec?.command ?? []) as string[];
      const paths = [...container.args, ...probe, ...(container.env ?? []).map((e: { value?: string }) => e.value ?? "")].filter((a: string) =>
        a.startsWith("/etc/"),
      );
      expect(paths.length).toBeGreaterThan(0);
      for (const path of paths) {
        const dir = path.slice(0, path.lastIndexOf("/"));
        expect(mounted.get(dir), `${workload.kind}: ${path}`).toContain(path.slice(dir.length + 1));
      }
      for (const env of container.env ?? []) if (env.valueFrom?.configMapKeyRef) expect(config).toContain(env.valueFrom.configMapKeyRef.key);
    }
  });

  it("use only options and HF3FS_METADATA_* variables the commands know", async () => {
    for (const container of [one("StatefulSet").spec.template.spec.containers[0], one("DaemonSet").spec.template.spec.containers[0], ...engines.map(relayOf)]) {
      const help = await runCli([container.args[0], "--help"]);
      expect(help.code).toBe(0);
      for (const flag of container.args.filter((a: string) => a.startsWith("--"))) expect(help.stdout, flag).toContain(`  ${flag} `);
      for (const { name } of container.env ?? []) if (name.startsWith("HF3FS_METADATA_")) expect(help.stdout, name).toContain(`env ${name})`);
    }
  });

  it.skipIf(missing !== "")(
    "probe a member over its mTLS, with its own certificate, and get SERVING (openssl's certificates in place of the Secret's)",
    async () => {
      const member = one("StatefulSet").spec.template.spec.containers[0];
      const certs = makeCertificates(tempDir());
      const files: Record<string, string> = { "tls.crt": certs.serverCert, "tls.key": certs.serverKey, "ca.crt": certs.ca };
      const local = (path: string) => (path.startsWith("/etc/hf3fs-metadata/tls/") ? files[path.slice("/etc/hf3fs-metadata/tls/".length)]! : path);
      const flags = ["--tls-cert", "--tls-key", "--tls-client-ca"].flatMap((flag) => [flag, local(flagValue(member.args, flag)!)]);
      const server = await startChildServer(["--in-memory", ...flags]);
      await server.logged("ready");
      const [command, ...args] = member.readinessProbe.exec.command as string[];
      expect(command).toBe("hf3fs-metadata");
      const probe = await runCli(args.map(local).map((a) => a.replace("https://127.0.0.1:18000", server.url)));
      expect([probe.code, probe.stdout.trim()]).toEqual([0, "SERVING"]);
      // Without the client certificate the member refuses the probe: the flags are what makes it pass.
      const bare = await runCli(["health", "--server", server.url, "--ca-file", certs.ca]);
      expect(bare.code).toBe(1);
    },
  );

  it("run a relay in each example engine's pod as a native sidecar: its namespace, its TP size, its token and certificate, probed inside", () => {
    const set = one("StatefulSet");
    expect(engines.map((e) => e.metadata.name).sort()).toEqual(["sglang-qwen3-14b", "vllm-llama-3-8b"]);
    for (const engine of engines) {
      const relay = relayOf(engine);
      expect(relay.restartPolicy, engine.metadata.name).toBe("Always");
      expect(relay.args[0]).toBe("relay");
      expect([flagValue(relay.args, "--host"), flagValue(relay.args, "--port")]).toEqual(["127.0.0.1", "18000"]);
      expect(flagValue(relay.args, "--upstream")).toBe(srvUpstreamOf(set));
      expect(relay.startupProbe.exec.command).toEqual(["hf3fs-metadata", "health", "--server", "http://127.0.0.1:18000"]);
      expect(engine.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(parseDuration(flagValue(relay.args, "--shutdown-timeout")!));
    }
    // vLLM names no namespace: its relay gives one, and vLLM's tensor-parallel size as world size.
    const vllm = engines.find((e) => e.metadata.name.startsWith("vllm"))!;
    const tp = flagValue(vllm.spec.template.spec.containers[0].args, "--tensor-parallel-size");
    expect([flagValue(relayOf(vllm).args, "--vllm-namespace"), flagValue(relayOf(vllm).args, "--vllm-world-size")]).toEqual(["llama-3-8b", tp]);
    // The certificates cert-manager makes land in the Secrets the relays and the members mount.
    const secretOf = (name: string) => examples.find((o) => o.kind === "Certificate" && o.metadata.name === name)!.spec.secretName;
    expect(secretOf("hf3fs-metadata-members")).toBe(set.spec.template.spec.volumes.find((v: { name: string }) => v.name === "tls").secret.secretName);
    expect(secretOf("hf3fs-metadata-relay")).toBe(vllm.spec.template.spec.volumes.find((v: { name: string }) => v.name === "relay-tls").secret.secretName);
    expect(examples.find((o) => o.metadata.name === "hf3fs-metadata-members")!.spec.ipAddresses).toContain("127.0.0.1"); // the probe's address
  });
});
