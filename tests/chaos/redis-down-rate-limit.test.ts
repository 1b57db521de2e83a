import { sampleData, startStack, type Stack } from "../support/stack.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * The per-account rate limit (RATE_LIMIT_PER_MINUTE) counts in Redis, shared by the replicas;
 * while Redis is down each API process counts on its own, in memory. An outage must not lift
 * the limit, and must not write a stack trace per request to stderr past the service's logger
 * (express-rate-limit's own console.error for a store that throws).
 *
 * Redis is a throwaway redis-server of this test, stopped mid-way; never the system one.
 */
describe("rate limit while Redis is down", () => {
  const LIMIT = 3;
  let redisServer: RedisServer;
  let stack: Stack;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url, RATE_LIMIT_PER_MINUTE: String(LIMIT) }, dispatcher: false });
  });
  afterAll(async () => {
    await stack?.close();
    await redisServer?.destroy();
  });

  const post = async (acct: { api: Stack["api"] }) => {
    const res = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    return { status: res.status, code: res.body?.error?.code, retryAfter: res.headers.get("retry-after") };
  };

  test("counted in memory per process while down: the limit holds, nothing on console.error", async () => {
    const before = await stack.newAccount();
    for (let i = 0; i < LIMIT; i++) expect((await post(before)).status).toBe(201);
    expect(await post(before)).toMatchObject({ status: 429, code: "rate_limited" });

    // What reaches console.error while Redis is down: express-rate-limit's report of a store
    // error, and (under jest) the service's own warnings and errors. Neither may come per request.
    const printed: unknown[][] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => void printed.push(args);
    try {
      await redisServer.stop();
      // An account that has not been counted yet: its allowance comes from this process's memory.
      const during = await stack.newAccount();
      for (let i = 0; i < LIMIT; i++) expect((await post(during)).status).toBe(201);
      const refused = await post(during);
      expect(refused).toMatchObject({ status: 429, code: "rate_limited" });
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(printed.map((args) => String(args[0]))).toEqual([]);
    } finally {
      console.error = consoleError;
      await redisServer.start();
    }
  });
});
