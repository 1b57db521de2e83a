import { createHash } from "node:crypto";
import { chmod, cp, lstat, mkdtemp, rename, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { RunAs } from "./postgres-process.js";

/**
 * The folder the embedded PostgreSQL's programs run from. As root they run as the `postgres`
 * user, which must be able to enter every folder on the way to them (the kernel checks that at
 * exec) and to their lib and share folders beside them. The platform package's own `native`
 * folder sits inside the clone, so a clone in a private folder (/root, `mktemp -d`: both 0700)
 * keeps them out of that user's reach; they are then copied once to the system's temporary
 * folder.
 */

/** Whether every folder from `dir` up to / lets others enter it (o+x). */
export async function othersCanEnter(dir: string): Promise<boolean> {
  for (let d = dir; ; d = path.dirname(d)) {
    if (((await stat(d)).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) return true;
  }
}

/** A platform package's folder of bin, lib and share, and the package's version (PostgreSQL's). */
export interface PlatformBinaries {
  native: string;
  /** e.g. "18.4.0-beta.17" for PostgreSQL 18.4. */
  version: string;
}

/**
 * `native` when PostgreSQL runs as this process's user (`runAs` without uid) or when others can
 * enter it, else its copy in `tmp` (by default the system's temporary folder) named
 * `mailhooks-postgres-<version>-<hash of native's path>`: made once, symbolic links and modes
 * kept, owned by this user and writable by it alone.
 * @throws Error naming the folders and what to do when the postgres user cannot enter `tmp`
 * either, or when the copy's name is taken by something not this user's own
 */
export async function binariesFolder({ native, version }: PlatformBinaries, runAs: RunAs, tmp = os.tmpdir()): Promise<string> {
  if (runAs.uid === undefined || (await othersCanEnter(native))) return native;
  if (!(await othersCanEnter(tmp))) {
    throw new Error(
      `the postgres user cannot enter ${native} (a folder on its way is private), nor ${tmp} for a copy: set TMPDIR to a folder others can enter (e.g. /tmp), move the clone to one, or set DATABASE_URL`,
    );
  }
  const copy = path.join(tmp, `mailhooks-postgres-${version}-${createHash("sha256").update(native).digest("hex").slice(0, 8)}`);
  if (!(await lstat(copy).catch(() => null))) {
    // Copied to a private folder and renamed into place when complete, so that a copy cut short
    // (or another demo's at the same time) is never taken for a whole one.
    const partial = await mkdtemp(`${copy}.partial-`);
    try {
      await cp(native, partial, { recursive: true, verbatimSymlinks: true });
      await chmod(partial, 0o755);
      await rename(partial, copy);
    } catch (error) {
      await rm(partial, { recursive: true, force: true });
      // A rename onto another run's finished copy fails (ENOTEMPTY): that copy serves as well.
      if (!(await lstat(copy).catch(() => null))) throw error;
    }
  }
  // Anyone may create names in /tmp: only a folder this user made and alone can change is run.
  const found = await lstat(copy);
  if (!found.isDirectory() || found.uid !== process.getuid?.() || (found.mode & 0o022) !== 0) {
    throw new Error(`${copy} is not a folder of this user's that only it can change: remove it and run the demo again`);
  }
  return copy;
}
