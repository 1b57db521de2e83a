import { sampleData, startStack, type Stack } from "../support/stack.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * Issue 17 ("Bounded by construction"), item 7: a Redis that accepts connections but answers
 * nothing (SIGSTOP on a throwaway redis-server: the connection stays "ready") must not add
 * ioredis's command timeout (5 s) to every request. The rate limiter's commands have a short
 * timeout of their own (RATE_LIMIT_REDIS_TIMEOUT_MS); one time-out sends it to memory for a while,
 * so the limit still holds and POST /v1/events keeps its usual latency.
 *
 * Redis is a throwaway redis-server of this test, never the system one.
 */
describe("rate limit while Redis is frozen", () => {
  const LIMIT = 5;
  /** Far below ioredis's 5 s command timeout, far above an accept on this machine. */
  const USUAL_MS = 1_500;
  let redisServer: RedisServer;
  let stack: Stack;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url, RATE_LIMIT_PER_MINUTE: String(LIMIT) }, dispatcher: false });
  });
  afterAll(async () => {
    redisServer?.thaw();
    await stack?.close();
    await redisServer?.destroy();
  });

  const post = async (acct: { api: Stack["api"] }) => {
    const started = Date.now();
    const res = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    return { status: res.status, code: res.body?.error?.code, ms: Date.now() - started };
  };

  test("each POST /v1/events answers in its usual time and the limit holds, counted in memory", async () => {
    const before = await stack.newAccount();
    expect((await post(before)).status).toBe(201);

    const during = await stack.newAccount();
    redisServer.freeze();
    try {
      const answers = [];
      for (let i = 0; i < LIMIT; i++) answers.push(await post(during));
      const refused = await post(during);
      expect(answers.map((a) => a.status)).toEqual(Array(LIMIT).fill(201));
      expect(refused).toMatchObject({ status: 429, code: "rate_limited" });
      for (const answer of [...answers, refused]) expect(answer.ms).toBeLessThan(USUAL_MS);
    } finally {
      redisServer.thaw();
    }
  });
});
