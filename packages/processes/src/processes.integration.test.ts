import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  findOnPath,
  runProcess,
  startNode,
  startProcess,
  startRedisServer,
  waitForExit,
  waitForOutput,
  type ProcessExit,
} from "./index.js";

/** A Node program given inline (`node -e`), with no loader. */
const node = (name: string, code: string, options: Parameters<typeof startProcess>[3] = {}) =>
  startProcess(name, process.execPath, ["-e", code], { env: { NODE_OPTIONS: undefined }, ...options });

describe("startProcess", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "processes-test-"));
    await writeFile(path.join(dir, "echo.mjs"), "console.log(JSON.stringify({ args: process.argv.slice(2), echo: process.env.ECHO }));\n");
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("collects stdout and stderr, and resolves exited with the code", async () => {
    const p = node("printer", "console.log('out'); console.error('err'); process.exit(3)");
    const exit = await waitForExit(p, 20_000);
    expect(exit.code).toBe(3);
    expect(p.stdout()).toBe("out\n");
    expect(p.output()).toContain("err\n");
    expect(p.running()).toBe(false);
  });

  test("keepLast bounds the output kept to its latest characters", async () => {
    const chatty = (stream: string) => `for (let i = 0; i < 20000; i++) ${stream}('line ' + i)`;
    const out = node("chatty", chatty("console.log"), { keepLast: 1000 });
    const err = node("chatty", chatty("console.error"), { keepLast: 1000 });
    expect((await waitForExit(out, 20_000)).code).toBe(0);
    expect((await waitForExit(err, 20_000)).code).toBe(0);
    for (const kept of [out.stdout(), out.output(), err.output()]) {
      expect(kept.length).toBeLessThanOrEqual(1000);
      expect(kept).toMatch(/\nline 19999\n$/);
    }
    expect(err.stdout()).toBe("");
  });

  test("stop() asks with stopSignal; killWithParent may name the signal sent at this process's exit", async () => {
    const p = node(
      "interrupted",
      "process.on('SIGINT', () => { console.log('SIGINT'); process.exit(0); }); console.log('up'); setInterval(() => {}, 1000)",
      {
        stopSignal: "SIGINT",
      },
    );
    await waitForOutput(p, "up");
    expect(await p.stop()).toMatchObject({ code: 0 });
    expect(p.stdout()).toBe("up\nSIGINT\n");
    // A parent that exits: its child hears SIGINT, the signal it was started with, and says so in a file.
    const heard = path.join(dir, "heard");
    const child = `process.on('SIGINT', () => { require('fs').writeFileSync(${JSON.stringify(heard)}, 'SIGINT'); process.exit(0); }); setInterval(() => {}, 1000)`;
    const parent = `import("${new URL("./process.ts", import.meta.url).href}").then(({ startProcess }) => {
      startProcess("child", process.execPath, ["-e", ${JSON.stringify(child)}], { killWithParent: "SIGINT", env: { NODE_OPTIONS: undefined } });
      setTimeout(() => process.exit(0), 500);
    })`;
    await runProcess(process.execPath, ["--import", "tsx", "-e", parent], { check: true, timeoutMs: 30_000 });
    const deadline = Date.now() + 10_000;
    while (!existsSync(heard)) {
      if (Date.now() > deadline) throw new Error("the child did not hear SIGINT within 10 s of its parent's exit");
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  (process.getuid?.() === 0 ? test : test.skip)("as root: runs as the uid and gid it is given", async () => {
    const nobody = { uid: 65534, gid: 65534 };
    expect((await runProcess("id", ["-u"], { ...nobody, check: true })).stdout).toBe("65534\n");
    const p = startProcess("id", "id", ["-g"], nobody);
    await waitForExit(p, 20_000);
    expect(p.stdout()).toBe("65534\n");
  });

  test("runProcess runs a program to its end: its code, stdout and stderr apart, its stdin from input", async () => {
    const script =
      "process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase())); console.error('to stderr'); process.exitCode = 3";
    expect(await runProcess(process.execPath, ["-e", script], { input: "hello", env: { NODE_OPTIONS: undefined } })).toEqual({
      pid: expect.any(Number),
      code: 3,
      signal: null,
      stdout: "HELLO",
      stderr: "to stderr\n",
    });
    await expect(runProcess("no-such-program-here", [])).rejects.toThrow("no-such-program-here could not start");
  });

  test("runProcess: its pid, in its folder; with check, an exit other than 0 rejects with its output", async () => {
    const env = { NODE_OPTIONS: undefined };
    const printPid = await runProcess(process.execPath, ["-e", "console.log(process.pid, process.cwd())"], { cwd: dir, env });
    expect(printPid.stdout).toBe(`${printPid.pid} ${dir}\n`);
    const fail = ["-e", "console.log('said'); console.error('why'); process.exit(4)"];
    await expect(runProcess(process.execPath, fail, { env })).resolves.toMatchObject({ code: 4, stdout: "said\n", stderr: "why\n" });
    await expect(runProcess(process.execPath, fail, { env, check: true })).rejects.toThrow(/ exited with 4; output:\nwhy\nsaid$/);
    await expect(runProcess(process.execPath, ["-e", ""], { env, check: true })).resolves.toMatchObject({ code: 0 });
  });

  test("runProcess with timeoutMs: SIGTERM once it is over, and a rejection with its output so far", async () => {
    const marker = path.join(dir, "terminated");
    const slow = `console.log('started'); process.on('SIGTERM', () => { require('fs').writeFileSync(${JSON.stringify(marker)}, ''); process.exit(1); }); setInterval(() => {}, 1000)`;
    const started = Date.now();
    await expect(runProcess(process.execPath, ["-e", slow], { env: { NODE_OPTIONS: undefined }, timeoutMs: 1_000 })).rejects.toThrow(
      /did not end within 1000 ms; output:\nstarted$/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    for (let i = 0; i < 100 && !existsSync(marker); i++) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(marker)).toBe(true);
    // One that ends in time is neither killed nor rejected.
    expect((await runProcess(process.execPath, ["-e", ""], { timeoutMs: 10_000 })).code).toBe(0);
  });

  test("passes the program's arguments after the entry, and the environment over this one's", async () => {
    const p = startNode("args", path.join(dir, "echo.mjs"), { args: ["a", "b"], env: { NODE_OPTIONS: undefined, ECHO: "yes" } });
    await waitForExit(p, 20_000);
    expect(JSON.parse(p.stdout())).toEqual({ args: ["a", "b"], echo: "yes" });
  });

  test("stop() sends SIGTERM, then SIGKILL after the grace period; its exit is then expected", async () => {
    const unexpected: ProcessExit[] = [];
    const p = node("stubborn", "process.on('SIGTERM', () => console.log('ignored')); console.log('up'); setInterval(() => {}, 1000)", {
      onUnexpectedExit: (e) => unexpected.push(e),
    });
    await waitForOutput(p, "up");
    const exit = await p.stop(300);
    expect(exit.signal).toBe("SIGKILL");
    expect(p.output()).toContain("ignored");
    expect(unexpected).toEqual([]);
  });

  test("an exit nobody asked for, or a program that cannot start, is reported once", async () => {
    const unexpected: ProcessExit[] = [];
    const p = node("crasher", "process.exit(7)", { onUnexpectedExit: (e) => unexpected.push(e) });
    await p.exited;
    const missing = startProcess("missing", "/nonexistent/program", [], { onUnexpectedExit: (e) => unexpected.push(e) });
    const exit = await missing.exited;
    await new Promise((r) => setImmediate(r));
    expect(exit.error?.message).toContain("ENOENT");
    expect(unexpected.map((e) => [e.code, e.error?.message.includes("ENOENT") ?? false])).toEqual([
      [7, false],
      [null, true],
    ]);
  });
});

const redisServer = findOnPath("redis-server");
// Without redis-server on PATH (a machine whose Redis is elsewhere) there is nothing to test.
(redisServer ? describe : describe.skip)("startRedisServer", () => {
  const cli = (port: number, ...args: string[]) => runProcess("redis-cli", ["-p", String(port), ...args]).then((r) => r.stdout.trim());

  test("appendOnly: a stop and a start on the same port keep the data; destroy removes the folder", async () => {
    const redis = await startRedisServer({ appendOnly: true });
    try {
      expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
      expect(redis.version).toMatch(/^\d+\.\d+/);
      await cli(redis.port, "set", "k", "v");
      await redis.stop();
      expect((await runProcess("redis-cli", ["-p", String(redis.port), "ping"])).code).not.toBe(0);
      await redis.start();
      expect(await cli(redis.port, "get", "k")).toBe("v");
    } finally {
      await redis.destroy();
    }
    expect(existsSync(redis.dir)).toBe(false);
  });

  test("a redis-server that cannot start is an error naming why, with nothing left behind", async () => {
    await expect(startRedisServer({ args: ["--no-such-directive", "x"] })).rejects.toThrow(/exited/);
    await expect(startRedisServer({ binary: "/nonexistent/redis-server" })).rejects.toThrow(
      /could not start \(spawn \/nonexistent\/redis-server ENOENT\)/,
    );
  });
});
