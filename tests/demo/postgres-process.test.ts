import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { initdb, postgresUser, startServer } from "../../scripts/demo/postgres-process.js";

/**
 * The embedded PostgreSQL's programs when they cannot start (scripts/demo/postgres-process.ts):
 * the demo gets a rejection naming the program and the reason, which it prints as one line,
 * rather than dying of an unhandled 'error' event with a stack trace.
 */

let dir: string;
beforeEach(async () => {
  // mkdtemp makes it 0700: only this user can enter it.
  dir = await mkdtemp(path.join(os.tmpdir(), "postgres-process-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

test("a postgres that is not there: the start rejects with why", async () => {
  const bin = path.join(dir, "missing", "bin");
  await expect(startServer(bin, path.join(dir, "data"), 1, await postgresUser())).rejects.toThrow(
    `the embedded PostgreSQL did not start (could not start ${bin}/postgres: spawn ${bin}/postgres ENOENT)`,
  );
});

test("an initdb that is not there: the initialisation rejects with why and leaves no password file", async () => {
  const bin = path.join(dir, "missing", "bin");
  const data = path.join(dir, "data");
  await expect(initdb(bin, data, "secret", await postgresUser())).rejects.toThrow(
    `${bin}/initdb could not start: spawn ${bin}/initdb ENOENT`,
  );
  await expect(rm(`${data}.initdb-password`)).rejects.toThrow("ENOENT");
});

// As root PostgreSQL runs as the postgres user, which cannot enter `dir`: what a clone in a
// private folder (mktemp -d, /root) met with the platform package's binaries inside it.
(process.getuid?.() === 0 ? test : test.skip)(
  "as root, programs in a folder the postgres user cannot enter: the start rejects with EACCES, naming the program",
  async () => {
    const bin = path.join(dir, "bin");
    await mkdir(bin);
    await writeFile(path.join(bin, "postgres"), "#!/bin/sh\nexit 0\n");
    await chmod(path.join(bin, "postgres"), 0o755);
    await expect(startServer(bin, path.join(dir, "data"), 1, await postgresUser())).rejects.toThrow(
      `the embedded PostgreSQL did not start (could not start ${bin}/postgres: spawn ${bin}/postgres EACCES)`,
    );
  },
);
