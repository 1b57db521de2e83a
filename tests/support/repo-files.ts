import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Folders that hold no file of the repository's own: installed, built, generated or scratch. */
const SKIPPED = new Set(["node_modules", "dist", ".git", ".tmp", "coverage", "results", "generated"]);

/**
 * The repository's files, relative to its root (`/` separated), walked from the file system
 * rather than asked of git, so that the unit tier needs no child process: everything but the
 * installed, built, generated and scratch folders.
 */
export function repositoryFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const relative = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (!SKIPPED.has(entry.name)) walk(relative);
      } else if (entry.isFile()) found.push(relative);
    }
  };
  walk("");
  return found.sort();
}
