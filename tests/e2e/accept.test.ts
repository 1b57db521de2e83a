import { captureLogs } from "@mailhooks/logger";
import { startDispatcherOn } from "../support/delivery-worker.js";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, expectError, expectValidation, startHookReceiver } from "../support/hooks.js";

/**
 * docs/api.md, "Accepted means delivered": what an answer acknowledges exists and is
 * delivered; the idempotency race; the batch; and a poison job (a deterministic failure after
 * the request was sent) that must end after one request instead of re-sending forever.
 */
describe("accepting events", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "200,200,200", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(() => stack.close());

  test("20 concurrent requests with one Idempotency-Key: all name the same event, which exists and is delivered once", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    await createHook(acct, hr, "/race", ["message.sent"]);
    const body = { event_type: "message.sent", data: sampleData("message.sent") };
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => acct.api("POST", "/v1/events", body, { "idempotency-key": "race-1" })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(19).fill(200), 201]);
    const ids = new Set(answers.map((a) => a.body.event_id));
    expect(ids.size).toBe(1);
    const [eventId] = ids;
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.status === 200 && r.body.status === "delivered",
    );
    expect(detail.body.destinations).toHaveLength(1);
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(1);
    expect(emailArrivals(hr.receiver.arrivals, "/race")).toHaveLength(1);
  });

  test("POST /v1/events/batch: 201 with one summary per item in request order; delivered; item keys behave like the header", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    await createHook(acct, hr, "/batch", ["message.sent", "message.opened"]);
    const items = [
      { event_type: "message.sent", data: sampleData("message.sent"), idempotency_key: "b-1" },
      { event_type: "message.opened", data: sampleData("message.opened"), occurred_at: "2026-11-20T10:00:00Z" },
      { event_type: "message.clicked", data: sampleData("message.clicked") },
    ];
    const res = await acct.api("POST", "/v1/events/batch", { events: items });
    expect(res.status).toBe(201);
    expect(res.body.data.map((e: any) => [e.event_type, e.status])).toEqual([
      ["message.sent", "pending"],
      ["message.opened", "pending"],
      // No webhook of the account takes clicks: delivered at once (docs/api.md, "Events").
      ["message.clicked", "delivered"],
    ]);
    expect(res.body.data[1].occurred_at).toBe("2026-11-20T10:00:00.000Z");
    await hr.receiver.waitFor((a) => emailArrivals(a, "/batch").length === 2);

    // The same key again: the first event in its place, nothing delivered again.
    const again = await acct.api("POST", "/v1/events/batch", {
      events: [items[0], { event_type: "message.sent", data: sampleData("message.sent") }],
    });
    expect(again.status).toBe(201);
    expect(again.body.data[0].event_id).toBe(res.body.data[0].event_id);
    expect(again.body.data[1].event_id).not.toBe(res.body.data[0].event_id);
    await hr.receiver.waitFor((a) => emailArrivals(a, "/batch").length === 3);
    // The same key with another body: 409, and nothing of that batch is stored.
    const before = await stack.prisma.event.count({ where: { accountId: acct.accountId } });
    const conflict = await acct.api("POST", "/v1/events/batch", {
      events: [
        { event_type: "message.sent", data: sampleData("message.sent") },
        { ...items[0], data: sampleData("message.sent") },
      ],
    });
    expectError(conflict, 409, "conflict");
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(before);
  });

  test("POST /v1/events/batch is all or nothing: one invalid item is 422 naming events.<i>.<path>, nothing stored", async () => {
    const acct = await stack.newAccount();
    const good = { event_type: "message.sent", data: sampleData("message.sent") };
    const res = await acct.api("POST", "/v1/events/batch", {
      events: [good, good, good, { event_type: "message.sent", data: sampleData("message.sent", { from: "not an address" }) }],
    });
    expectValidation(res, "events.3.data.from");
    expectValidation(
      await acct.api("POST", "/v1/events/batch", { events: [good, { ...good, event_type: "message.nope" }] }),
      "events.1.event_type",
    );
    expectValidation(await acct.api("POST", "/v1/events/batch", { events: [] }), "events");
    expectValidation(await acct.api("POST", "/v1/events/batch", { events: Array(501).fill(good) }), "events");
    expectValidation(
      await acct.api("POST", "/v1/events/batch", {
        events: [
          { ...good, idempotency_key: "k" },
          { ...good, idempotency_key: "k" },
        ],
      }),
      "events.1.idempotency_key",
    );
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(0);
  });
});

describe("a poison job: a deterministic failure after the request was sent", () => {
  const env = { DELIVERY_RETRY_DELAYS_MS: "200,200,200" };
  let stack: Stack;
  let dispatcher: ReturnType<typeof startDispatcherOn>;
  const marker = `poison-${Date.now()}`;
  const trigger = `test_poison_${marker.replace(/-/g, "_")}`;
  beforeAll(async () => {
    stack = await startStack({ env, dispatcher: false });
    dispatcher = startDispatcherOn(stack, env);
    // Recording an attempt to these webhooks' URLs fails, always, after the POST was made: what a
    // bug or a constraint in the recording would do. Not an outage: nothing may keep it for later.
    // At `/<marker>` only the record of an answer is refused (a row with a response or an error
    // other than internal_error); at `/<marker>-all` every row is, the internal_error row too.
    await stack.pool.query(`
      CREATE OR REPLACE FUNCTION "${trigger}"() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.url LIKE '%/${marker}-all'
           OR (NEW.url LIKE '%/${marker}' AND NEW.error IS DISTINCT FROM 'internal_error') THEN
          RAISE EXCEPTION 'injected failure while recording';
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER "${trigger}" BEFORE INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION "${trigger}"();`);
  });
  afterAll(async () => {
    await stack.pool.query(`DROP TRIGGER IF EXISTS "${trigger}" ON deliveries; DROP FUNCTION IF EXISTS "${trigger}"();`);
    await dispatcher?.close();
    await stack.close();
  });

  /** webhook_jobs_failed_total of `job` and `reason`, as Prometheus would scrape it from the dispatcher. */
  const jobsFailedMetric = async (job: string, reason: string) => {
    const text = await dispatcher.metrics.registry.metrics();
    const line = text.split("\n").find((l) => l.startsWith(`webhook_jobs_failed_total{job="${job}",reason="${reason}"} `));
    return line ? Number(line.split(" ")[1]) : 0;
  };

  test("the work ends after one request: the destination fails with an internal_error row (logged with its job, counted), nothing is sent again", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, `/${marker}`, ["message.sent"]);
    expect(await jobsFailedMetric("delivery", "error")).toBe(0);
    let eventId = "";
    let destinationId = "";
    let detail!: Awaited<ReturnType<typeof acct.api>>;
    const logged = await captureLogs(
      async () => {
        const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
        eventId = posted.body.event_id as string;
        [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
        detail = await waitUntil(
          () => acct.api("GET", `/v1/events/${eventId}`),
          (r) => r.body.status !== "pending",
          10_000,
        );
        await waitUntil(
          () => jobsFailedMetric("delivery", "error"),
          (n) => n >= 1,
          5_000,
        );
      },
      { level: process.env.LOG_LEVEL ?? "warn", format: "pretty" },
    );
    expect(detail.body.status).toBe("failed");
    // The request was made (the receiver answered 200) but could not be recorded: the row says so.
    expect(emailArrivals(hr.receiver.arrivals, `/${marker}`).map((a) => a.status)).toEqual([200]);
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "failed", attempts: 1 }]);
    expect((await deliveryRows(acct, { event_id: eventId })).map((r) => [r.trigger, r.attempt, r.response_status, r.error])).toEqual([
      ["initial", 0, null, "internal_error"],
    ]);
    // Visibly: one error line naming the job (its id: the destination's and its lease), and the
    // counter. (The webhook's test event is poisoned too, as its own job: not counted here.)
    const lines = logged
      .split("\n")
      .filter((l) => l.includes("job failed for good"))
      .map((l) => JSON.parse(l))
      .filter((l) => l.job === "delivery");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "error", module: "dispatcher", job: "delivery" });
    expect(lines[0].jobId).toMatch(new RegExp(`^${destinationId}-\\d+$`));
    expect(lines[0].error).toMatch(/injected failure while recording/);
    expect(await jobsFailedMetric("delivery", "error")).toBe(1);
    // Its work is over: nothing of it waits to be claimed again. Bounded absence check besides: a
    // lease given back would be claimed within a pass, a retry within 0.2 s.
    const { rows } = await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE work_id = $1", [destinationId]);
    expect(rows[0].n).toBe(0);
    await expect(hr.receiver.waitFor((all) => emailArrivals(all, `/${marker}`).length > 1, 2_000)).rejects.toThrow(TIMED_OUT);
    expect(emailArrivals(hr.receiver.arrivals, `/${marker}`)).toHaveLength(1);
    expect(await deliveryRows(acct, { event_id: eventId })).toHaveLength(1);
  });

  test("when even the internal_error row is refused, the work still ends failed (without a row), and nothing is sent again", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, `/${marker}-all`, ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const eventId = posted.body.event_id as string;
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
      10_000,
    );
    expect(detail.body.status).toBe("failed");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "failed", attempts: 0 }]);
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    const { rows } = await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE work_id = $1", [destinationId]);
    expect(rows[0].n).toBe(0);
    await new Promise((r) => setTimeout(r, 2_000)); // bounded absence check, as above
    expect(emailArrivals(hr.receiver.arrivals, `/${marker}-all`)).toHaveLength(1);
    expect(await deliveryRows(acct, { event_id: eventId })).toEqual([]);
  });
});
