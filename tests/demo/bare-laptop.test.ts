import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import getPort from "get-port";
import { findOnPath } from "../../scripts/demo/local-redis.js";
import { answers } from "../../scripts/demo/probe.js";

/**
 * `npm run demo` on a machine where nothing answers at DATABASE_URL and REDIS_URL (CONTRACT.md
 * section 9): it starts an embedded PostgreSQL and a redis-server, passes, and stops both; or,
 * without redis-server on PATH, stops at once with one line naming what to install.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Runs the demo as `npm run demo` does (from source), with `env` over this process's environment. */
function runDemo(env: Record<string, string>, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  const base: Record<string, string | undefined> = { ...process.env };
  // jest's own flags (--experimental-vm-modules) are not the demo's.
  delete base.NODE_OPTIONS;
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=source", path.join(ROOT, "scripts/demo/main.ts")], {
    cwd: ROOT,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      reject(new Error(`the demo did not finish within ${timeoutMs} ms; output:\n${output}`));
    }, timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Two loopback URLs where nothing listens (free ports from get-port, never bound). */
async function closedUrls(): Promise<{ DATABASE_URL: string; REDIS_URL: string }> {
  const [pgPort, redisPort] = [await getPort({ host: "127.0.0.1" }), await getPort({ host: "127.0.0.1" })];
  return { DATABASE_URL: `postgresql://postgres@127.0.0.1:${pgPort}/webhooks`, REDIS_URL: `redis://127.0.0.1:${redisPort}` };
}

const redisServer = findOnPath("redis-server");

// Skipped (and shown as skipped) on a machine whose Redis is not a redis-server on PATH, e.g. Docker's.
(redisServer ? test : test.skip)(
  "with nothing at DATABASE_URL and REDIS_URL it starts an embedded PostgreSQL and a redis-server, passes, and stops them",
  async () => {
    const { code, output } = await runDemo(await closedUrls(), 240_000);
    expect({ code, tail: output.slice(-3_000) }).toEqual({ code: 0, tail: expect.stringContaining("demo: OK") });
    const pg = /started an embedded PostgreSQL \d+ on 127\.0\.0\.1:(\d+) \(data in [^)]*embedded-postgres/.exec(output);
    const redis = /started redis-server \S* ?on 127\.0\.0\.1:(\d+)/.exec(output);
    expect(pg).not.toBeNull();
    expect(redis).not.toBeNull();
    // Both were stopped when the demo ended.
    expect(await answers("127.0.0.1", Number(pg![1]))).toBe(false);
    expect(await answers("127.0.0.1", Number(redis![1]))).toBe(false);
  },
  250_000,
);

test("with nothing at REDIS_URL and no redis-server on PATH it exits 1 with one line naming what to install", async () => {
  const urls = await closedUrls();
  const withoutRedis = (process.env.PATH ?? "")
    .split(path.delimiter)
    .filter((dir) => !findOnPath("redis-server", dir))
    .join(path.delimiter);
  const { code, output } = await runDemo({ ...urls, PATH: withoutRedis }, 60_000);
  expect({ code, output: output.trim() }).toEqual({
    code: 1,
    output: `demo: nothing answers at ${urls.REDIS_URL} and redis-server is not on PATH: install Redis (apt install redis-server / brew install redis) or set REDIS_URL`,
  });
});
