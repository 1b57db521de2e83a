import { captureLogs } from "@mailhooks/logger";
import { newId } from "@mailhooks/db";
import { enqueue, inTransaction, testDeliveryRowId } from "@mailhooks/delivery-state";
import { JOB_NAMES } from "@mailhooks/queue";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";

/**
 * Issue 17 items 2 and 8 in the in-process stack:
 * - work that provably cannot be carried out (here: a webhook whose stored headers are corrupt,
 *   a poison job for the destination, the replay and the test request alike) ends `failed` with
 *   a delivery row whose `error` is `internal_error` (a replay also with its audit entry), and
 *   the headers' text never reaches a log (docs/api.md, "Deliveries log": nothing ends without a reason);
 * - a success wins over a concurrent disable: an attempt in flight while its webhook is disabled,
 *   then answered 200, leaves the destination and the event `delivered`, as its row says.
 */
const SECRET_TEXT = "Bearer do-not-log-4f1e";

describe("work ends with a reason", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "200,200,200" } });
  });
  afterAll(() => stack?.close());

  test("poison work (corrupt stored headers) ends failed with internal_error rows: the destination, a replay (and its audit entry), a test request; nothing is sent and the headers' text is never logged", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/poison", ["message.sent"]);
    await hr.receiver.waitFor((all) => all.some((a) => a.path === "/poison"));
    // Not JSON once opened (a legacy plaintext opens as itself): JSON.parse's message would quote it.
    await stack.pool.query("UPDATE webhooks SET headers = $1 WHERE id = $2", [`{"Authorization": "${SECRET_TEXT}"`, hook.id]);

    let eventId = "";
    let replayId = "";
    const testId = newId("tst");
    const logs = await captureLogs(
      async () => {
        const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
        expect(posted.status).toBe(201);
        eventId = posted.body.event_id;
        await waitUntil(
          () => acct.api("GET", `/v1/events/${eventId}`),
          (r) => r.body.status !== "pending",
        );
        const replayed = await acct.api("POST", `/v1/events/${eventId}/replay`, { target_url: hr.url("/poison/elsewhere") });
        expect(replayed.status).toBe(202);
        replayId = replayed.body.replays[0].replay_id;
        await inTransaction(stack.pool, async (client) => {
          await client.query("INSERT INTO test_deliveries (id, account_id, webhook_id, queue_prefix) VALUES ($1, $2, $3, $4)", [
            testId,
            acct.accountId,
            hook.id,
            stack.prefix,
          ]);
          await enqueue(client, stack.prefix, [
            {
              kind: JOB_NAMES.testDelivery,
              workId: testId,
              webhookId: hook.id,
              accountId: acct.accountId,
            },
          ]);
        });
        await waitUntil(
          () =>
            stack.pool.query(
              "SELECT status::text FROM test_deliveries WHERE id = $1 UNION ALL SELECT status::text FROM replays WHERE id = $2",
              [testId, replayId],
            ),
          (r) => r.rows.every((x) => x.status !== "pending"),
        );
      },
      { level: process.env.LOG_LEVEL ?? "warn", format: "pretty" },
    );

    const detail = await acct.api("GET", `/v1/events/${eventId}`);
    expect(detail.body.status).toBe("failed");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "failed", attempts: 2 }]);
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.map((r) => [r.trigger, r.attempt, r.url, r.response_status, r.error])).toEqual([
      ["initial", 0, hook.url, null, "internal_error"],
      ["replay", 0, hr.url("/poison/elsewhere"), null, "internal_error"],
    ]);
    const audit = await acct.api("GET", `/v1/audit-log?event_id=${eventId}`);
    expect(
      audit.body.data.map((a: { destination_url: string; response_status: number | null; error: string }) => [
        a.destination_url,
        a.response_status,
        a.error,
      ]),
    ).toEqual([[hr.url("/poison/elsewhere"), null, "internal_error"]]);
    const testRows = (await deliveryRows(acct, { webhook_id: hook.id })).filter((r) => r.id === testDeliveryRowId(testId));
    expect(testRows.map((r) => [r.trigger, r.event_id, r.response_status, r.error])).toEqual([["test", null, null, "internal_error"]]);
    expect((await stack.pool.query("SELECT status::text FROM test_deliveries WHERE id = $1", [testId])).rows[0].status).toBe("failed");

    // Nothing was sent but the creation's test event, and the stored text was never logged.
    expect(emailArrivals(hr.receiver.arrivals, "/poison")).toEqual([]);
    expect(hr.receiver.arrivals.filter((a) => a.path !== "/poison")).toEqual([]);
    expect(logs).toContain("job failed for good");
    expect(logs).not.toContain("do-not-log");
  });

  test("a success wins over a concurrent disable: the attempt in flight when the webhook is disabled, then answered 200, leaves the destination and the event delivered", async () => {
    const acct = await stack.newAccount();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let inFlight = false;
    const hr = await startHookReceiver(stack, (arrival) => {
      if (arrival.event !== "message.sent") return {};
      inFlight = true;
      return { hold: released };
    });
    const hook = await createHook(acct, hr, "/race", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const eventId = posted.body.event_id as string;
    await waitUntil(
      async () => inFlight,
      (x) => x,
    );

    expect((await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);
    // The disable cancelled the destination while its request was held.
    expect((await acct.api("GET", `/v1/events/${eventId}`)).body.destinations[0].status).toBe("cancelled");
    release();

    const rows = await waitUntil(
      () => deliveryRows(acct, { event_id: eventId }),
      (r) => r.length > 0,
    );
    expect(rows.map((r) => [r.trigger, r.response_status, r.error])).toEqual([["initial", 200, null]]);
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "failed" || r.body.destinations[0].status !== "cancelled",
      5_000,
    );
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
  });
});
