import path from "node:path";
import getPort from "get-port";
import { findOnPath } from "@mailhooks/processes";
import { answers } from "../../scripts/demo/probe.js";
import { NOT_KEPT_LINE } from "../../scripts/demo/keep.js";
import { runDemo, SIGN_IN_LINE } from "./run-demo.js";

/**
 * `npm run demo` on a machine where nothing answers at DATABASE_URL and REDIS_URL (README, "The
 * two commands"): it starts an embedded PostgreSQL and a redis-server, passes, ends saying how to
 * get a dashboard sign-in link (`--keep`) rather than printing one that would lead nowhere, and
 * stops both; or, without redis-server on PATH, stops at once with one line
 * naming what to install.
 */

/** Two loopback URLs where nothing listens (free ports from get-port, never bound). */
async function closedUrls(): Promise<{ DATABASE_URL: string; REDIS_URL: string }> {
  const [pgPort, redisPort] = [await getPort({ host: "127.0.0.1" }), await getPort({ host: "127.0.0.1" })];
  return { DATABASE_URL: `postgresql://postgres@127.0.0.1:${pgPort}/webhooks`, REDIS_URL: `redis://127.0.0.1:${redisPort}` };
}

const redisServer = findOnPath("redis-server");

// Skipped (and shown as skipped) on a machine whose Redis is not a redis-server on PATH, e.g.
// Docker's; under CI (CI set) it fails instead, since CI is where it must run.
(redisServer || process.env.CI ? test : test.skip)(
  "with nothing at DATABASE_URL and REDIS_URL it starts an embedded PostgreSQL and a redis-server, passes, prints no sign-in link once all has stopped, and stops them",
  async () => {
    if (!redisServer)
      throw new Error("CI is set and redis-server is not on PATH: install Redis (apt install redis-server) so that the demo can start one");
    const { code, output, stdoutLines } = await runDemo(await closedUrls(), 240_000);
    expect({ code, tail: output.slice(-3_000) }).toEqual({ code: 0, tail: expect.stringContaining("demo: OK") });
    // Everything stops right after the report: no sign-in link (it would lead nowhere), but the
    // last line says how to get one.
    expect(stdoutLines.filter((line) => SIGN_IN_LINE.test(line) || line.includes("/dashboard/sign-in/"))).toEqual([]);
    expect(stdoutLines.at(-1)).toBe(NOT_KEPT_LINE);
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
