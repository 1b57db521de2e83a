import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";
import getPort from "get-port";

/** How a child process ended. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Date.now() at the exit, in ms. */
  at: number;
  /** Set when it could not start at all (e.g. ENOENT: the program is not on PATH). */
  error?: Error;
}

export interface StartOptions {
  /** Working folder (default: this process's). */
  cwd?: string;
  /** Variables set over this process's environment; `undefined` removes one. */
  env?: Record<string, string | undefined>;
  /**
   * Where its stdout and stderr go: `collect` (default) keeps them for `output()`/`stdout()`;
   * `prefix` prints each line as `  [name] line` (stdout on stdout, stderr on stderr) and keeps
   * them too; `inherit` hands it this process's own (nothing kept).
   */
  output?: "collect" | "prefix" | "inherit";
  /**
   * How many of its latest characters of output `output()` and `stdout()` keep, each (default
   * Infinity: all). A long-running program's log grows with its life; a tail bounds what it costs
   * this process.
   */
  keepLast?: number;
  /** An IPC channel (`child.send`, its "message" events), for a Node program. */
  ipc?: boolean;
  /** Called once when it exits (or cannot start) without `stop()` having been asked. */
  onUnexpectedExit?: (exit: ProcessExit) => void;
  /**
   * Signals it when this process exits, however it exits, if it still runs: `true` SIGKILLs it, a
   * signal sends that one (default false: nothing).
   */
  killWithParent?: boolean | NodeJS.Signals;
  /** The signal `stop()` asks it to end with (default SIGTERM; PostgreSQL's fast shutdown is SIGINT). */
  stopSignal?: NodeJS.Signals;
  /** The user and group it runs as (default this process's; another needs root). */
  uid?: number;
  gid?: number;
}

/** A started child process. */
export interface StartedProcess {
  name: string;
  child: ChildProcess;
  /** Its pid (undefined only when it could not start). */
  pid: number;
  /** Resolves once it has exited (or failed to start); never rejects. */
  exited: Promise<ProcessExit>;
  /** stdout and stderr so far, interleaved as they came (`collect` and `prefix` only). */
  output: () => string;
  /** stdout alone so far (`collect` and `prefix` only). */
  stdout: () => string;
  running: () => boolean;
  /**
   * Stops it: SIGCONT (it may be paused), its stopSignal (SIGTERM), then SIGKILL if it still runs after
   * `graceMs` (default 10 s; Infinity waits for good). Its exit is then not unexpected.
   */
  stop: (graceMs?: number) => Promise<ProcessExit>;
}

/** The processes to signal at this process's exit, with the signal. */
const killedWithParent = new Map<StartedProcess, NodeJS.Signals>();
let exitHookInstalled = false;

/** Starts `command` with `args`; see StartOptions. Never throws: a failure to start is an exit. */
export function startProcess(name: string, command: string, args: string[], options: StartOptions = {}): StartedProcess {
  const output = options.output ?? "collect";
  const stdio = output === "inherit" ? "inherit" : "pipe";
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: withoutUndefined({ ...process.env, ...options.env }),
    uid: options.uid,
    gid: options.gid,
    stdio: ["ignore", stdio, stdio, ...(options.ipc ? (["ipc"] as const) : [])],
  });
  let all = "";
  let out = "";
  const keepLast = options.keepLast ?? Infinity;
  const tail = (kept: string, chunk: string) => {
    const joined = kept + chunk;
    return joined.length > keepLast ? joined.slice(joined.length - keepLast) : joined;
  };
  if (output !== "inherit") {
    child.stdout!.on("data", (chunk: Buffer) => {
      all = tail(all, chunk.toString());
      out = tail(out, chunk.toString());
    });
    child.stderr!.on("data", (chunk: Buffer) => (all = tail(all, chunk.toString())));
    if (output === "prefix") {
      printLines(child.stdout!, (line) => process.stdout.write(`  [${name}] ${line}\n`));
      printLines(child.stderr!, (line) => process.stderr.write(`  [${name}] ${line}\n`));
    }
  }
  let stopping = false;
  const exited = new Promise<ProcessExit>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal, at: Date.now() }));
    // A program that cannot start emits "error" and no "exit".
    child.on("error", (error) => {
      if (child.pid === undefined) resolve({ code: null, signal: null, at: Date.now(), error });
    });
  });
  const handle: StartedProcess = {
    name,
    child,
    pid: child.pid!,
    exited,
    output: () => all,
    stdout: () => out,
    running: () => child.pid !== undefined && child.exitCode === null && child.signalCode === null,
    stop: async (graceMs = 10_000) => {
      stopping = true;
      if (!handle.running()) return exited;
      child.kill("SIGCONT");
      child.kill(options.stopSignal ?? "SIGTERM");
      const timer = Number.isFinite(graceMs) ? setTimeout(() => child.kill("SIGKILL"), graceMs) : undefined;
      const exit = await exited;
      clearTimeout(timer);
      return exit;
    },
  };
  if (options.killWithParent) {
    killedWithParent.set(handle, options.killWithParent === true ? "SIGKILL" : options.killWithParent);
    installExitHook();
  }
  void exited.then((exit) => {
    killedWithParent.delete(handle);
    if (!stopping) options.onUnexpectedExit?.(exit);
  });
  return handle;
}

/**
 * The arguments of `node` for `entry`: a TypeScript source under tsx's loader (`--import tsx`,
 * not the tsx CLI, which would run it in a grandchild that signals do not reach) with the
 * workspaces' `source` condition, a built `.js` as it is; `nodeFlags` (e.g. the heap limits of
 * `npm run start:api`) first.
 */
export function nodeArguments(entry: string, nodeFlags: string[] = []): string[] {
  const loader = /\.[cm]?ts$/.test(entry) ? ["--import", "tsx", "--conditions=source"] : [];
  return [...nodeFlags, ...loader, entry];
}

/**
 * Starts `entry` (an absolute path) with this Node (see nodeArguments), `options.args` being the
 * program's own arguments, after the entry; see startProcess for the rest.
 */
export function startNode(
  name: string,
  entry: string,
  options: StartOptions & { nodeFlags?: string[]; args?: string[] } = {},
): StartedProcess {
  return startProcess(name, process.execPath, [...nodeArguments(entry, options.nodeFlags), ...(options.args ?? [])], options);
}

/** How a program run to its end (runProcess) ended, and what it printed, stdout and stderr apart. */
export interface CompletedProcess {
  /** Its pid, e.g. to find what it named after itself. */
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions extends Pick<StartOptions, "cwd" | "env" | "uid" | "gid"> {
  /** Written to its stdin, which is then closed (default: no stdin at all). */
  input?: string;
  /** Rejects unless it exits with 0 (default false: any exit resolves). */
  check?: boolean;
  /** SIGTERMs it after this many ms (SIGKILL 5 s later if it still runs) and rejects. */
  timeoutMs?: number;
}

/**
 * Runs `command` with `args` to its end: a one-shot program (a CLI command, pg_dump), for the
 * tests. `cwd`, `env`, `uid` and `gid` as startProcess takes them; see RunOptions for the rest.
 * @throws Error when it cannot start (ENOENT: not on PATH), when it runs longer than `timeoutMs`,
 * or with `check` when it exits other than with 0; each names it, the last two with its output
 */
export function runProcess(command: string, args: string[], options: RunOptions = {}): Promise<CompletedProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: withoutUndefined({ ...process.env, ...options.env }),
      uid: options.uid,
      gid: options.gid,
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    const printed = () =>
      [stderr, stdout]
        .map((chunks) => Buffer.concat(chunks).toString("utf8").trim())
        .filter(Boolean)
        .join("\n");
    const named = `${command} ${args.join(" ")}`.trim();
    child.stdout!.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr!.on("data", (chunk: Buffer) => stderr.push(chunk));
    child.once("error", (error) => reject(new Error(`${command} could not start: ${error.message}`)));
    let killer: NodeJS.Timeout | undefined;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            child.kill("SIGTERM");
            killer = setTimeout(() => child.kill("SIGKILL"), 5_000).unref();
            // Now, not at its "close": a grandchild may hold its pipes open.
            reject(new Error(`${named} did not end within ${options.timeoutMs} ms; output:\n${printed()}`));
          }, options.timeoutMs);
    child.once("exit", () => clearTimeout(killer));
    // "close", not "exit": the pipes are drained by then.
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (options.check && code !== 0) reject(new Error(`${named} exited with ${code ?? signal}; output:\n${printed()}`));
      resolve({
        pid: child.pid!,
        code,
        signal,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8"),
      });
    });
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

/** A free TCP port on loopback (get-port). */
export const freePort = (): Promise<number> => getPort({ host: "127.0.0.1" });

/** The first executable `name` in `searchPath` (a PATH value), or null. */
export function findOnPath(name: string, searchPath = process.env.PATH ?? ""): string | null {
  for (const dir of searchPath.split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this folder
    }
  }
  return null;
}

function withoutUndefined(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** Calls `print` with each complete line of `stream` (a last line without newline at its end). */
function printLines(stream: NodeJS.ReadableStream, print: (line: string) => void): void {
  let rest = "";
  stream.on("data", (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split("\n");
    rest = lines.pop()!;
    for (const line of lines) if (line !== "") print(line);
  });
  stream.on("end", () => {
    if (rest !== "") print(rest);
  });
}

/** One 'exit' listener for every process started with killWithParent. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const [p, signal] of killedWithParent) p.child.kill(signal);
  });
}
