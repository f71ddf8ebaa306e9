/**
 * The layers of src/, checked by `npm run lint` (dependency-cruiser): the
 * core knows nothing but itself and the generated types, and the others
 * know it by its public face (core/index.ts) alone, or its light face for
 * options (core/options.ts); the store nothing
 * above it; the service (the edge and the handlers) nothing of HTTP, the
 * framings, the process or replication; the framings (the wire's shapes
 * onto the edge) nothing of the process or replication; replication
 * nothing of the process; the server (the process's assembly) nothing of
 * the CLI that starts it; the relay is built from the edge, the framings
 * and the client, and none of them knows it. No circles.
 */
module.exports = {
  forbidden: [
    {
      name: "core-is-pure",
      comment: "src/core does no I/O and knows no layer above it: it imports only src/core and gen/.",
      severity: "error",
      from: { path: "^src/core/" },
      to: { path: "^src/(?!core/)" },
    },
    {
      name: "core-has-one-face",
      comment:
        "Outside src/core, the core is used through src/core/index.ts, or src/core/options.ts (the part a command's options need, without generated code, so that a start binds its port first): its other modules are its own.",
      severity: "error",
      from: { path: "^src/(?!core/)" },
      to: { path: "^src/core/(?!(index|options)\\.ts$)" },
    },
    {
      name: "store-below-service",
      comment: "src/store knows nothing of the service, the process or replication.",
      severity: "error",
      from: { path: "^src/store/" },
      to: { path: "^src/(service|server|replication|client|cli)/" },
    },
    {
      name: "service-below-server",
      comment: "src/service (the edge and handlers) knows nothing of the framings, the process or replication.",
      severity: "error",
      from: { path: "^src/service/" },
      to: { path: "^src/(framing|server|replication|client|cli)/" },
    },
    {
      name: "service-knows-no-http",
      comment: "src/service reads no wire: node:http and node:http2 belong to the framings (src/framing/).",
      severity: "error",
      from: { path: "^src/service/" },
      to: { path: "^(node:)?https?2?$", dependencyTypes: ["core"] },
    },
    {
      name: "framing-below-server",
      comment: "src/framing (the wire's shapes onto the edge) knows nothing of the process, replication or the client.",
      severity: "error",
      from: { path: "^src/framing/" },
      to: { path: "^src/(server|replication|client|cli)/" },
    },
    {
      name: "replication-below-server",
      comment: "src/replication knows nothing of the process that assembles it.",
      severity: "error",
      from: { path: "^src/replication/" },
      to: { path: "^src/(server|client|cli)/" },
    },
    {
      name: "server-below-cli",
      comment: "src/server assembles a server as a library; src/cli (flags, commands) starts it, never the other way.",
      severity: "error",
      from: { path: "^src/server/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "relay-below-cli",
      comment: "src/relay assembles a relay as a library; src/cli starts it, never the other way.",
      severity: "error",
      from: { path: "^src/relay/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "relay-on-top",
      comment: "src/relay is built from the layers below it (the edge, the framings, the client); none of them knows it.",
      severity: "error",
      from: { path: "^src/(core|store|service|framing|server|replication|client|protocol)/" },
      to: { path: "^src/relay/" },
    },
    {
      name: "no-circles",
      comment: "No import circle anywhere in src/.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(gen|node_modules|dist)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
