import { MAX_EXPIRATIONS } from "@mailhooks/delivery-state";
import { startDispatcherOn, type InProcessDispatcher } from "../support/delivery-worker.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { endChaosFile } from "./support/processes.js";

/**
 * Work that keeps killing the dispatchers that run it (its lease expired MAX_EXPIRATIONS times)
 * is never claimed again: the claim that finds its last lease expired ends it `failed` with an
 * `internal_error` row (docs/scheduler.md; docs/api.md, "Deliveries log"), logs it and counts it
 * (webhook_jobs_failed_total{reason="expired"}), and nothing is sent. Twenty real crashes would
 * take minutes, so the work is set up as the nineteenth one left it: `expirations` at
 * MAX_EXPIRATIONS - 1 and a lease that has just expired, directly in work_items. The same
 * webhook's other work is delivered as usual.
 */
describe("work whose lease expired MAX_EXPIRATIONS times", () => {
  let stack: Stack;
  let dispatcher: InProcessDispatcher | undefined;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => endChaosFile(stack, () => dispatcher?.close()));

  test("ends failed with an internal_error row, counted, and is never sent", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    await createHook(acct, hr, "/stalled", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    // As the nineteenth dispatcher that died running it left it.
    const { rowCount } = await stack.pool.query(
      `UPDATE work_items SET expirations = $2, lease = $2, leased_until = now() - interval '1 millisecond' WHERE work_id = $1`,
      [destinationId, MAX_EXPIRATIONS - 1],
    );
    expect(rowCount).toBe(1);
    // A second event of the same webhook, after it: an ordinary one.
    const next = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });

    dispatcher = startDispatcherOn(stack, { QUEUE_PREFIX: stack.prefix, DISPATCHER_CONCURRENCY: "4" });
    const ended = await waitUntil(
      () => stack.prisma.destination.findUniqueOrThrow({ where: { id: destinationId } }),
      (d) => d.status !== "pending",
    );
    expect(ended.status).toBe("failed");
    expect((await acct.api("GET", `/v1/events/${eventId}`)).body.status).toBe("failed");
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.map((r) => [r.trigger, r.attempt, r.response_status, r.error])).toEqual([["initial", 0, null, "internal_error"]]);
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE work_id = $1", [destinationId])).rows[0].n).toBe(0);
    const metrics = await dispatcher.metrics.registry.metrics();
    expect(metrics).toMatch(/webhook_jobs_failed_total\{job="delivery",reason="expired"\} 1\n/);

    // The webhook's next event is delivered; the failed one was never sent.
    await waitUntil(
      () => acct.api("GET", `/v1/events/${next.body.event_id}`),
      (r) => r.body.status === "delivered",
    );
    expect(emailArrivals(hr.receiver.arrivals, "/stalled").map((a) => a.messageId)).toEqual([
      (await acct.api("GET", `/v1/events/${next.body.event_id}`)).body.payload.data.messageId,
    ]);
  });
});
