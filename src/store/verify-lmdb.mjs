// verify-lmdb.mjs DIR: walks every key of every database of the LMDB
// environment in DIR, read-only, and prints {"entries": N}. It runs in a
// child process because LMDB maps the file into memory: a truncated or
// corrupt file can kill the reader with SIGBUS or SIGSEGV, and that must not
// be the server. Exit 0: readable; exit 1: LMDB reported an error (stderr).
import { open } from "lmdb";

const [dir, ...names] = process.argv.slice(2);
try {
  const env = open({ path: dir, noSubdir: false, readOnly: true });
  let entries = 0;
  const present = new Set();
  for (const key of env.getKeys({})) {
    present.add(key);
    entries++;
  }
  for (const name of names.filter((n) => present.has(n))) {
    entries += env.openDB(name, {}).getKeysCount({});
  }
  await env.close();
  process.stdout.write(JSON.stringify({ entries }));
} catch (error) {
  process.stderr.write(String(error?.message ?? error));
  process.exit(1);
}
