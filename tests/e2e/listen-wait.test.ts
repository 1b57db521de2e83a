import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";

/**
 * A waiting pull (docs/develop-locally.md, "Waiting for work"): GET /v1/webhooks/{id}/pending
 * with `wait` holds no PostgreSQL connection while it waits, answers within `wait` when nothing
 * comes, and is woken by new work at once. Runs alone (ALONE_FILES): it asserts a time bound.
 * The stack has no dispatcher, so that the pool's only user is the API.
 */
describe("a waiting pull", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  /** A listen webhook whose test event was pulled and answered: nothing of it waits. */
  const quietListenWebhook = async (events: string[]) => {
    const hook = (await stack.api("POST", "/v1/webhooks", { url: null, mode: "listen", events })).body;
    const [test] = (await stack.api("GET", `/v1/webhooks/${hook.id}/pending`)).body.data;
    await stack.api("POST", `/v1/webhooks/${hook.id}/pending/${test.delivery_id}`, { status: 200, duration_ms: 1 });
    return hook as { id: string };
  };
  const checkedOut = () => stack.pool.totalCount - stack.pool.idleCount;

  test("with wait=25 and no work it holds no database connection, and answers empty within 25 s", async () => {
    const hook = await quietListenWebhook(["message.opened"]);
    const started = Date.now();
    const pulling = stack.api("GET", `/v1/webhooks/${hook.id}/pending?wait=25`);
    let answered = false;
    void pulling.finally(() => (answered = true));
    // Sampled every 100 ms while it waits: no connection is checked out of the pool.
    const samples: { atMs: number; checkedOut: number }[] = [];
    await waitUntil(
      () => {
        samples.push({ atMs: Date.now() - started, checkedOut: checkedOut() });
        return answered;
      },
      (done) => done,
      30_000,
      100,
    );
    const res = await pulling;
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([]);
    expect(took).toBeGreaterThanOrEqual(25_000);
    expect(took).toBeLessThan(26_000);
    // The first samples may see the pull's own query, and those from its deadline on its last look
    // for work (the 25 s start at the API, after `started`); every one between sees none.
    expect(samples.length).toBeGreaterThan(200);
    expect(samples.slice(5).filter((sample) => sample.atMs < 24_900 && sample.checkedOut > 0)).toEqual([]);
  }, 40_000);

  test("a new event wakes it within 100 ms of its acceptance", async () => {
    const hook = await quietListenWebhook(["message.clicked"]);
    const lastPull = async () =>
      (await stack.pool.query<{ at: string }>("SELECT last_pulled_at::text AS at FROM webhooks WHERE id = $1", [hook.id])).rows[0].at;
    const before = await lastPull();
    const pulling = stack.api("GET", `/v1/webhooks/${hook.id}/pending?wait=25`);
    let answeredAt = 0;
    void pulling.then(() => (answeredAt = Date.now()));
    // Waiting: this pull was stamped, and it holds no connection any more.
    await waitUntil(
      async () => (await lastPull()) !== before && checkedOut() === 0,
      (waiting) => waiting,
    );
    expect(answeredAt).toBe(0);
    const sent = await stack.api("POST", "/v1/events", { event_type: "message.clicked", data: sampleData("message.clicked") });
    const acceptedAt = Date.now();
    expect(sent.status).toBe(201);
    const res = await pulling;
    expect(res.body.data.map((i: { event_id: string }) => i.event_id)).toEqual([sent.body.event_id]);
    expect(answeredAt - acceptedAt).toBeLessThan(100);
  }, 40_000);
});
