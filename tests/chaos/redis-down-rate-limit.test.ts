import { jest } from "@jest/globals";
import { sampleData, startStack, type Stack } from "../support/stack.js";
import { startThrowawayRedis, type ThrowawayRedis } from "./support/redis-server.js";

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
  let redisServer: ThrowawayRedis;
  let stack: Stack;

  beforeAll(async () => {
    redisServer = await startThrowawayRedis();
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

    const consoleError = jest.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      await redisServer.stop();
      // An account that has not been counted yet: its allowance comes from this process's memory.
      const during = await stack.newAccount();
      for (let i = 0; i < LIMIT; i++) expect((await post(during)).status).toBe(201);
      const refused = await post(during);
      expect(refused).toMatchObject({ status: 429, code: "rate_limited" });
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(consoleError.mock.calls.map((c) => String(c[0]))).toEqual([]);
    } finally {
      consoleError.mockRestore();
      await redisServer.start();
    }
  });
});
