#!/usr/bin/env -S node --initial-old-space-size=64
// The flag keeps V8's limit for the old generation at 64 MB or more: left to itself, V8 set it so close
// to a small live heap (a relay's, a shard's server's) that under load it marked and compacted the whole
// heap over and over (docs/performance.md, "V8's old generation"). `npm start`, src/cli/bin.mjs and the
// benchmarks' processes start with the same flags (test/unit/cli/node-flags.test.ts).
const COMMANDS = `usage: hf3fs-metadata <command> [options]

commands:
  serve     run the metadata server (serve --help lists its options)
  relay     serve the server's surface on an engine node's localhost, relaying to --upstream (relay --help)
  inspect   print what a data dir holds (inspect --data-dir DIR)
  stats     print a running server's page usage per namespace and rank (stats [--server URL] [--namespace NS])
  reset     forget a namespace whole so that it can be defined anew (reset --namespace NS | --all [--force])
  clear     drop a namespace's keys and keep its ranks, for running engines (clear --namespace NS | --all)
  health    exit 0 only when a running server is SERVING (health [--server URL])
  status    print the members of a highly available cluster, its leader and each member's lag (status [--server URL])

stats, health, status, reset and clear also take --token-file FILE (or env HF3FS_METADATA_TOKEN), and for an
https:// server --ca-file FILE and, for mTLS, --cert-file FILE --key-file FILE.
--version prints the package's version.`;

/** main runs one CLI command and returns the process exit code. Each command loads its own modules, so a start loads only what it runs. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  switch (command) {
    case "serve":
      return (await import("./serve-command.js")).serveCommand(args);
    case "relay":
      return (await import("./relay-command.js")).relayCommand(args);
    case "inspect":
      return (await import("./inspect-command.js")).inspectCommand(args);
    case "stats":
      return (await import("./operator-commands.js")).statsCommand(args);
    case "reset":
      return (await import("./operator-commands.js")).resetCommand(args);
    case "clear":
      return (await import("./operator-commands.js")).clearCommand(args);
    case "health":
      return (await import("./operator-commands.js")).healthCommand(args);
    case "status":
      return (await import("./status-command.js")).statusCommand(args);
    case "--version":
    case "-v":
      console.log((await import("./package-version.js")).packageVersion());
      return 0;
    case "--help":
    case "-h":
      console.log(COMMANDS);
      return 0;
    default:
      console.error(command === undefined ? COMMANDS : `hf3fs-metadata: unknown command "${command}"\n\n${COMMANDS}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: Error) => {
    console.error(`hf3fs-metadata: ${error.stack ?? error.message}`);
    process.exit(1);
  },
);
