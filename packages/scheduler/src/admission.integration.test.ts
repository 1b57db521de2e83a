import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { createAdmissionControl, rateIntervalMs, type AdmissionControl } from "./admission.js";
import { FAST_WAIT_MS } from "./holds.js";

/**
 * The admission rule, with a real Redis for what is shared (CONTRIBUTING.md, Habits 9): one dispatcher of
 * 8 slots, so C = 8 and the reserve R = 1 on top of them. Each test has a key prefix of its own.
 */
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

describe("admission", () => {
  let redis: Redis;
  let promoted: string[];
  let admission: AdmissionControl;
  let prefix: string;

  beforeAll(() => {
    redis = new Redis(redisUrl);
  });
  afterAll(async () => {
    await redis.quit();
  });
  beforeEach(() => {
    prefix = `test-sched-${randomUUID()}`;
    promoted = [];
    admission = createAdmissionControl({
      redis,
      keyPrefix: prefix,
      localConcurrency: 8,
      slowAttemptMs: 1_000,
      promote: async (jobId) => void promoted.push(jobId),
    });
  });
  afterEach(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
  });

  const ask = (jobId: string, webhookId: string, accountId: string, rateLimit: number | null = null) =>
    admission.admit({ jobId, webhookId, accountId, holds: 0, rateLimit });

  test("alone, a webhook takes all C slots; the reserve is a newcomer's, of another account or the same one", async () => {
    for (let i = 0; i < 8; i++) expect(await ask(`a${i}`, "wh_a", "acct_1")).toEqual({ admitted: true });
    expect(await ask("a8", "wh_a", "acct_1")).toMatchObject({ admitted: false, reason: "share" });
    // Another webhook, of another account or of the same one (which holds none of the reserve), finds the reserve.
    expect(await ask("b0", "wh_b", "acct_1")).toEqual({ admitted: true });
    expect((await admission.state()).running).toBe(9);
    expect(await ask("c0", "wh_c", "acct_3")).toMatchObject({ admitted: false, reason: "share" });
  });

  test("a job the reserve is not for waits in its worker slot for one of the C to free, takes it at once, one job per freed slot", async () => {
    // C = 16 and R = 2: 20 worker slots (C + R for attempts, R more that fetch).
    const wide = createAdmissionControl({ redis, keyPrefix: prefix, localConcurrency: 16, slowAttemptMs: 1_000 });
    const askWide = (jobId: string) => wide.admit({ jobId, webhookId: "wh_a", accountId: "acct_1", holds: 0, rateLimit: null });
    for (let i = 0; i < 16; i++) expect(await askWide(`a${i}`)).toEqual({ admitted: true });
    const first = askWide("a16");
    const second = askWide("a17");
    // 16 run, a16 and a17 wait: the last R = 2 worker slots are left free to fetch, so a18 does not wait.
    expect(await askWide("a18")).toMatchObject({ admitted: false, reason: "share" });
    await wide.release({ jobId: "a0", webhookId: "wh_a", accountId: "acct_1", durationMs: 20 });
    // The slot a0 freed is a16's (the longest waiting), not a trip through the delayed set.
    expect(await first).toEqual({ admitted: true });
    expect((await wide.state()).running).toBe(16);
    // No slot freed for a17 within its wait: it is held, for its hold's 50 ms from then, not from
    // when it asked (that time has passed: it would be back at once).
    const held = await second;
    expect(held).toMatchObject({ admitted: false, reason: "share" });
    expect(held.admitted === false && held.retryAt).toBeGreaterThanOrEqual(Date.now() + 40);
  });

  test("a fast webhook's job waits in any worker slot, the fetching ones too: its attempts free one within milliseconds", async () => {
    // C = 16 and R = 2: 20 worker slots. Alone and fast, a webhook's jobs fetched into the R
    // fetching slots were held and fetched again, over and over (30 % of a quick bench's attempts).
    // slowAttemptMs 10 s: the attempts left running must not make wh_a slow on a loaded machine.
    const wide = createAdmissionControl({ redis, keyPrefix: prefix, localConcurrency: 16, slowAttemptMs: 10_000 });
    const askWide = (jobId: string, webhookId = "wh_a", accountId = "acct_1") =>
      wide.admit({ jobId, webhookId, accountId, holds: 0, rateLimit: null });
    const done = (jobId: string) => wide.release({ jobId, webhookId: "wh_a", accountId: "acct_1", durationMs: 20 });
    for (let i = 0; i < 8; i++) {
      expect(await askWide(`q${i}`)).toEqual({ admitted: true });
      await done(`q${i}`);
    }
    expect(await wide.fastWebhooks()).toEqual(["wh_a"]);
    for (let i = 0; i < 16; i++) expect(await askWide(`a${i}`)).toEqual({ admitted: true });
    const a5StartedAt = Date.now();
    const waiting = [16, 17, 18, 19].map((i) => askWide(`a${i}`));
    for (let i = 0; i < 4; i++) await done(`a${i}`);
    expect(await Promise.all(waiting)).toEqual(Array(4).fill({ admitted: true }));
    // The worker slot an ended attempt leaves fetches the next job: a newcomer's finds the reserve.
    await done("a4");
    expect((await wide.state()).running).toBe(15);
    expect(await askWide("a20")).toEqual({ admitted: true });
    expect(await askWide("b0", "wh_b", "acct_2")).toEqual({ admitted: true });
    // Should its attempts hang: once the oldest running here (a5) has run FAST_WAIT_MS, its jobs
    // wait as any other's, only while R worker slots are left free to fetch (17 run of 20).
    while (Date.now() - a5StartedAt <= FAST_WAIT_MS) await new Promise((resolve) => setTimeout(resolve, 20));
    const x1 = askWide("x1").then((answer) => ({ id: "x1", answer }));
    const x2 = askWide("x2").then((answer) => ({ id: "x2", answer }));
    // x1 waits its 50 ms; x2 is held at once, so it answers first.
    expect(await Promise.race([x1, x2])).toMatchObject({ id: "x2", answer: { admitted: false, reason: "share" } });
    expect((await x1).answer).toMatchObject({ admitted: false, reason: "share" });
  });

  test("a refused job waits in its worker slot only while another is left free to fetch: else it is held at once", async () => {
    for (let i = 0; i < 8; i++) expect(await ask(`a${i}`, "wh_a", "acct_1")).toEqual({ admitted: true });
    expect(await ask("b0", "wh_b", "acct_2")).toEqual({ admitted: true });
    // C + R run (C = 8, R = 1): the newcomer's worker slot is the one fetching slot left. Waiting
    // in it would keep every other job from being fetched while the C hang.
    const c0 = ask("c0", "wh_c", "acct_3");
    await admission.release({ jobId: "a0", webhookId: "wh_a", accountId: "acct_1", durationMs: 20 });
    expect(await c0).toMatchObject({ admitted: false, reason: "share" });
  });

  test("a slow webhook gets its fair share and never the reserve; a quick attempt makes it fast again", async () => {
    expect(await ask("s0", "wh_slow", "acct_1")).toEqual({ admitted: true });
    await admission.release({ jobId: "s0", webhookId: "wh_slow", accountId: "acct_1", durationMs: 5_000 });
    // Alone it may still use C = 8 (its fair share is all of C, never the reserve).
    for (let i = 1; i <= 8; i++) expect(await ask(`s${i}`, "wh_slow", "acct_1")).toEqual({ admitted: true });
    expect(await ask("s9", "wh_slow", "acct_1")).toMatchObject({ admitted: false, reason: "share" });
    // Another account arrives: the slow one is over its share now and waits; the other is admitted.
    expect(await ask("o0", "wh_other", "acct_2")).toEqual({ admitted: true });
    await admission.release({ jobId: "s1", webhookId: "wh_slow", accountId: "acct_1", durationMs: 5_000 });
    const held = await ask("s10", "wh_slow", "acct_1");
    expect(held).toMatchObject({ admitted: false, reason: "share" });
    // The end of one of its attempts wakes its held jobs at once.
    await admission.release({ jobId: "s2", webhookId: "wh_slow", accountId: "acct_1", durationMs: 5_000 });
    expect(promoted).toEqual(expect.arrayContaining(["s9"]));
    expect((await admission.state()).slowWebhooks).toBe(1);
    await admission.release({ jobId: "s3", webhookId: "wh_slow", accountId: "acct_1", durationMs: 10 });
    expect((await admission.state()).slowWebhooks).toBe(0);
  });

  test("a slow webhook's admitted attempts start one slowAttemptMs / C apart; other webhooks' are not paced", async () => {
    // C = 8, slowAttemptMs = 1,000: one slow start per 125 ms on this dispatcher.
    expect(await ask("p0", "wh_slow", "acct_1")).toEqual({ admitted: true });
    await admission.release({ jobId: "p0", webhookId: "wh_slow", accountId: "acct_1", durationMs: 5_000 });
    // Its retries come due together: admitted one after another, in turns.
    const started: number[] = [];
    const asked = Date.now();
    await Promise.all(
      ["p1", "p2", "p3"].map(async (jobId) => {
        expect(await ask(jobId, "wh_slow", "acct_1")).toEqual({ admitted: true });
        started.push(Date.now());
      }),
    );
    started.sort((a, b) => a - b);
    expect(started[0] - asked).toBeLessThan(100);
    expect(started[1] - started[0]).toBeGreaterThanOrEqual(120);
    expect(started[2] - started[1]).toBeGreaterThanOrEqual(120);
    // A quick webhook's attempt meanwhile waits for no turn.
    const quickAsked = Date.now();
    const slowTurn = ask("p4", "wh_slow", "acct_1");
    expect(await ask("q0", "wh_quick", "acct_2")).toEqual({ admitted: true });
    expect(Date.now() - quickAsked).toBeLessThan(100);
    expect(await slowTurn).toEqual({ admitted: true });
    expect((await admission.state()).running).toBe(5);
  });

  test("rate_limit: one turn per 1.15 s / r, each waiting job a turn of its own; a lifted limit gives them back", async () => {
    const interval = rateIntervalMs(10);
    const start = Date.now();
    expect(await ask("r0", "wh_r", "acct_1", 10)).toEqual({ admitted: true });
    const second = await ask("r1", "wh_r", "acct_1", 10);
    const third = await ask("r2", "wh_r", "acct_1", 10);
    expect(second).toMatchObject({ admitted: false, reason: "rate_limit" });
    expect(third).toMatchObject({ admitted: false, reason: "rate_limit" });
    const at = (d: typeof second) => (d.admitted ? 0 : d.retryAt);
    expect(at(second) - start).toBeGreaterThanOrEqual(interval - 5);
    expect(at(third) - at(second)).toBeGreaterThanOrEqual(Math.floor(interval) - 1);
    expect((await admission.state()).waitingForRateLimit).toBe(2);
    // Asked again before its turn: still waiting, for the same turn.
    expect(await ask("r1", "wh_r", "acct_1", 10)).toMatchObject({ admitted: false, reason: "rate_limit", retryAt: at(second) });
    // The limit is lifted: the turns are dropped and the waiting jobs promoted.
    expect(await admission.reviewRateLimits(async () => null)).toBe(1);
    expect(promoted.sort()).toEqual(["r1", "r2"]);
    expect(await ask("r1", "wh_r", "acct_1", null)).toEqual({ admitted: true });
    // Unchanged limits are left alone.
    expect(await ask("q0", "wh_q", "acct_1", 5)).toEqual({ admitted: true });
    expect(await ask("q1", "wh_q", "acct_1", 5)).toMatchObject({ admitted: false });
    expect(await admission.reviewRateLimits(async () => 5)).toBe(0);
  });

  test("a slow webhook's fresh attempts do not keep its account's other webhooks from the reserve", async () => {
    expect(await ask("h0", "wh_hang", "acct_1")).toEqual({ admitted: true });
    await admission.release({ jobId: "h0", webhookId: "wh_hang", accountId: "acct_1", durationMs: 5_000 });
    // Its retries come back all at once and take C; none of them is a quick attempt.
    for (let i = 1; i <= 8; i++) expect(await ask(`h${i}`, "wh_hang", "acct_1")).toEqual({ admitted: true });
    expect(await ask("own0", "wh_own", "acct_1")).toEqual({ admitted: true });
  });

  test("an attempt running longer than slowAttemptMs marks its webhook slow for the relays before it ends", async () => {
    const quickToTell = createAdmissionControl({ redis, keyPrefix: prefix, localConcurrency: 2, slowAttemptMs: 100 });
    expect(await quickToTell.admit({ jobId: "h0", webhookId: "wh_hang", accountId: "acct_1", holds: 0, rateLimit: null })).toEqual({
      admitted: true,
    });
    await quickToTell.refreshSlowMarks();
    expect(await quickToTell.slowWebhooks()).toEqual([]);
    // Still running, never released: the refresh (every second in a dispatcher) tells Redis.
    const deadline = Date.now() + 5_000;
    while ((await quickToTell.slowWebhooks()).length === 0 && Date.now() < deadline) {
      await quickToTell.refreshSlowMarks();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await admission.webhookClasses()).toEqual({ slow: ["wh_hang"], fast: [] });
  });

  test("each dispatcher counts its own slots; a job asking again replaces its own entry; slow marks are shared", async () => {
    const other = createAdmissionControl({ redis, keyPrefix: prefix, localConcurrency: 2, slowAttemptMs: 1_000 });
    expect(await other.admit({ jobId: "d0", webhookId: "wh_d", accountId: "acct_1", holds: 0, rateLimit: null })).toEqual({
      admitted: true,
    });
    expect(await other.admit({ jobId: "d0", webhookId: "wh_d", accountId: "acct_1", holds: 0, rateLimit: null })).toEqual({
      admitted: true,
    });
    expect((await other.state()).running).toBe(1);
    expect((await admission.state()).running).toBe(0);
    await other.release({ jobId: "d0", webhookId: "wh_d", accountId: "acct_1", durationMs: 5_000 });
    expect(await admission.slowWebhooks()).toEqual(["wh_d"]);
    // Learnt by the first dispatcher: wh_d is slow there too (never the reserve: C = 8 others run).
    await admission.refreshSlowMarks();
    for (let i = 0; i < 8; i++) expect(await ask(`x${i}`, `wh_x${i}`, `acct_x${i}`)).toEqual({ admitted: true });
    expect(await ask("d1", "wh_d", "acct_1")).toMatchObject({ admitted: false, reason: "share" });
    expect(await ask("y0", "wh_y", "acct_y")).toEqual({ admitted: true });
  });

  test("quick attempts mark their webhook fast, slow ones slow, for the relays", async () => {
    // One quick answer (a test event) is not enough, nor 7; 8 within a second are.
    expect(await ask("f0", "wh_fast", "acct_1")).toEqual({ admitted: true });
    await admission.release({ jobId: "f0", webhookId: "wh_fast", accountId: "acct_1", durationMs: 20 });
    expect(await admission.fastWebhooks()).toEqual([]);
    for (let i = 1; i < 7; i++) {
      expect(await ask(`f${i}`, "wh_fast", "acct_1")).toEqual({ admitted: true });
      await admission.release({ jobId: `f${i}`, webhookId: "wh_fast", accountId: "acct_1", durationMs: 20 });
    }
    expect(await admission.fastWebhooks()).toEqual([]);
    expect(await ask("f7", "wh_fast", "acct_1")).toEqual({ admitted: true });
    await admission.release({ jobId: "f7", webhookId: "wh_fast", accountId: "acct_1", durationMs: 20 });
    expect(await ask("l0", "wh_long", "acct_1")).toEqual({ admitted: true });
    await admission.release({ jobId: "l0", webhookId: "wh_long", accountId: "acct_1", durationMs: 5_000 });
    expect(await admission.webhookClasses()).toEqual({ slow: ["wh_long"], fast: ["wh_fast"] });
  });
});
