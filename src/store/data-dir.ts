import { accessSync, constants, mkdirSync, readdirSync, type Stats, statSync } from "node:fs";
import { join } from "node:path";

/** DataDirError says, in one line naming the path, why a data dir cannot hold the store. */
export class DataDirError extends Error {
  override name = "DataDirError";
}

/** STORE_FILES are the files an LMDB environment keeps in its directory. */
const STORE_FILES = new Set(["data.mdb", "lock.mdb"]);
/** IGNORED are entries a mounted volume may hold beside the store. */
const IGNORED = new Set(["lost+found"]);

/**
 * prepareDataDir checks that `path` can hold the store, creating it when
 * missing (unless readOnly): it must be a directory, writable, and hold
 * nothing but the store's own files, so that the server never mixes its
 * store into a directory used for something else. Any name works, dots
 * included; an existing empty directory (a mounted volume) is fine.
 */
export function prepareDataDir(path: string, readOnly: boolean): void {
  const stats = statOrUndefined(path);
  if (stats === undefined) {
    if (readOnly) throw new DataDirError(`data dir ${path} does not exist`);
    try {
      mkdirSync(path, { recursive: true });
    } catch (error) {
      throw new DataDirError(`cannot create data dir ${path}: ${(error as Error).message}`);
    }
    return;
  }
  if (!stats.isDirectory()) throw new DataDirError(`data dir ${path} is not a directory`);
  try {
    accessSync(path, readOnly ? constants.R_OK | constants.X_OK : constants.R_OK | constants.W_OK | constants.X_OK);
  } catch {
    throw new DataDirError(`data dir ${path} is not ${readOnly ? "readable" : "writable"} by this process`);
  }
  const unrelated = readdirSync(path).filter((name) => !STORE_FILES.has(name) && !IGNORED.has(name));
  if (unrelated.length > 0) {
    const shown = unrelated.slice(0, 3).join(", ");
    throw new DataDirError(`data dir ${path} holds files that are not an hf3fs-metadata store (${shown}): use an empty or new directory`);
  }
}

/** statOrUndefined stats a path; undefined when it, or a parent, does not exist as a directory. */
function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw new DataDirError(`cannot use data dir ${path}: ${(error as Error).message}`);
  }
}

/** dataFile is the path of the store's data file in a data dir. */
export function dataFile(path: string): string {
  return join(path, "data.mdb");
}
