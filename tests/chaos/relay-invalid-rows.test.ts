import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { at, createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { endChaosFile, freePort, startDispatcher, waitForOutput } from "./support/processes.js";

/**
 * An outbox row that no worker could run (data its job's schema refuses, an unknown job name: a
 * bug in whatever wrote it) is not queued, and its work does not stay pending for the sweeper
 * to queue again and again: the relay ends it `failed` without an attempt (a delivery row with
 * `error: "internal_error"` says why), in the transaction
 * that deletes the row, logs it with the row's id and counts it
 * (webhook_jobs_failed_total{reason="invalid_outbox_row"}). Nothing is sent, then or later.
 */
const SWEEP = { SWEEP_INTERVAL_MS: "1000", SWEEP_AFTER_MS: "1000" };

describe("an invalid outbox row", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => endChaosFile(stack));

  test("ends its work failed, logged with the row id and counted, and never sends", async () => {
    const hr = await startHookReceiver(stack);
    await createHook(stack, hr, "/invalid", ["message.sent"]);
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    // The row as a buggy writer left it: data its job's schema refuses. And one of no known job.
    const { rows } = await stack.pool.query(`UPDATE outbox SET data = '{"destinationId": 42}'::jsonb WHERE job_id = $1 RETURNING id`, [
      destinationId,
    ]);
    expect(rows).toHaveLength(1);
    const outboxId = String(rows[0].id);
    const unknown = await stack.pool.query(
      `INSERT INTO outbox (queue_prefix, job_name, job_id, data) VALUES ($1, 'mystery', 'nothing', '{}'::jsonb) RETURNING id`,
      [stack.prefix],
    );
    const unknownId = String(unknown.rows[0].id);

    const metricsPort = await freePort();
    const dispatcher = startDispatcher("dispatcher", { QUEUE_PREFIX: stack.prefix, METRICS_PORT: String(metricsPort), ...SWEEP });

    const destination = await waitUntil(
      () => stack.prisma.destination.findUniqueOrThrow({ where: { id: destinationId } }),
      (d) => d.status !== "pending",
      30_000,
    );
    expect(destination.status).toBe("failed");
    expect((await stack.api("GET", `/v1/events/${eventId}`)).body.status).toBe("failed");
    // Ended with a row that says why (docs/api.md, "Deliveries log"), and nothing sent.
    expect((await deliveryRows(stack, { event_id: eventId })).map((r) => [r.trigger, r.attempt, r.response_status, r.error])).toEqual([
      ["initial", 0, null, "internal_error"],
    ]);
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM outbox WHERE queue_prefix = $1", [stack.prefix])).rows[0].n).toBe(0);

    // Logged with the row's id, and counted.
    await waitForOutput(dispatcher, new RegExp(`outbox row cannot be queued[^\\n]*"outboxId":"${outboxId}"`));
    await waitForOutput(dispatcher, new RegExp(`outbox row cannot be queued[^\\n]*"outboxId":"${unknownId}"`));
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/webhook_jobs_failed_total\{job="delivery",reason="invalid_outbox_row"\} 1\n/);
    expect(metrics).toMatch(/webhook_jobs_failed_total\{job="mystery",reason="invalid_outbox_row"\} 1\n/);

    // Several sweeps later (SWEEP_INTERVAL_MS 1 s) nothing was queued again nor sent: the test event only.
    await new Promise((r) => setTimeout(r, 3_000)); // bounded absence check
    expect((await stack.prisma.destination.findUniqueOrThrow({ where: { id: destinationId } })).status).toBe("failed");
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM outbox WHERE job_id = $1", [destinationId])).rows[0].n).toBe(0);
    expect(emailArrivals(hr.receiver.arrivals, "/invalid")).toEqual([]);
    expect(at(hr.receiver.arrivals, "/invalid", "webhook.test")).toHaveLength(1);
    expect(dispatcher.running()).toBe(true);
  }, 60_000);
});
