import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const PYTHON = "/usr/bin/python3";

/**
 * TOOLS are the Debian packages the suite runs against, each with how to
 * tell it is installed. `.ci/debian-packages` installs every one of them.
 */
const TOOLS = {
  etcd: { packages: ["etcd-server"], present: () => spawnSync("/usr/bin/etcd", ["--version"]).status === 0 },
  openssl: { packages: ["openssl"], present: () => spawnSync("openssl", ["version"]).status === 0 },
  protoc: {
    packages: ["protobuf-compiler", "libprotobuf-dev"],
    present: () => spawnSync("protoc", ["--version"]).status === 0 && existsSync("/usr/include/google/protobuf/any.proto"),
  },
  // The probes import what the scripts use, not only the package's name: an empty directory of that name imports too.
  grpcio: {
    packages: ["python3-grpcio", "python3-protobuf"],
    present: () => python("from grpc import insecure_channel; from google.protobuf.descriptor_pb2 import FileDescriptorProto"),
  },
  chromium: { packages: ["chromium"], present: () => spawnSync("chromium", ["--version"]).status === 0 },
  systemd: { packages: ["systemd"], present: () => spawnSync("systemd-analyze", ["--version"]).status === 0 },
  podman: {
    packages: ["podman", "runc", "iptables"],
    present: () => spawnSync("podman", ["--version"]).status === 0 && spawnSync("runc", ["--version"]).status === 0,
  },
  debootstrap: { packages: ["debootstrap"], present: () => existsSync("/usr/sbin/debootstrap") },
  requests: { packages: ["python3-requests"], present: () => python("from requests.adapters import HTTPAdapter; from urllib3.util.retry import Retry") },
} as const;

/** python tells whether /usr/bin/python3 runs `code`. */
function python(code: string): boolean {
  return spawnSync(PYTHON, ["-c", code]).status === 0;
}

/** Tool names a tool the suite needs (TOOLS). */
export type Tool = keyof typeof TOOLS;

/**
 * lacking says which Debian packages `what` needs that this machine lacks
 * ("" when it has them all). A test file skips when it is not "", after one
 * line that names the packages; under CI=true a lacking package fails the
 * run instead, so CI never passes by skipping.
 */
export function lacking(what: string, ...tools: Tool[]): string {
  const packages = tools.filter((tool) => !TOOLS[tool].present()).flatMap((tool) => TOOLS[tool].packages);
  if (packages.length === 0) return "";
  const missing = [...new Set(packages)].join(" ");
  if (process.env.CI === "true") throw new Error(`CI must run ${what} but lacks the Debian packages ${missing}`);
  console.warn(`skipping ${what}: needs the Debian packages ${missing} (apt-get install -y ${missing}, or bash .ci/debian-packages for all)`);
  return missing;
}
