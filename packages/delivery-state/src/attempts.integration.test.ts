import { randomUUID } from "node:crypto";
import pg from "pg";
import { createPool, newId } from "@mailhooks/db";
import {
  cancelDestination,
  cancelReplay,
  cancelTestDelivery,
  failWithoutAttempt,
  INLINE_PAYLOAD_BYTES,
  loadDestination,
  loadPayload,
  PAYLOAD_READ_CHARS,
  loadReplay,
  loadTestDelivery,
  recordDestinationAttempt,
  recordDestinationAttempts,
  recordReplayAttempt,
  recordTestAttempt,
  replayCancelled,
  testDeliveryRowId,
  type AttemptRecord,
  type LoadedDestination,
} from "./attempts.js";
import { acceptEvents } from "./ingest.js";
import { releaseLeases } from "./leases.js";
import { acceptReplays } from "./replays.js";
import { eventStatus } from "./status.js";
import { registerWebhook } from "./webhook-registration.js";
import { changeWebhook, deleteWebhook } from "./webhooks.js";

/**
 * The owner of delivery state on its own, against the test database (`npm test` migrates it):
 * jobs that run twice write once, a recorded attempt is reported as such, the failing streak
 * counts rows written, cancellations, and the status rules of docs/api.md, "Statuses". Every test
 * makes its own account; the outbox rows this file accepts carry a queue prefix of its own, so no
 * relay of another test takes them, and they are removed at the end.
 */
const pool: pg.Pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 4);
const prefix = `test-ds-${randomUUID()}`;

afterAll(async () => {
  await pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [prefix]);
  await pool.end();
});

const OK: AttemptRecord = { ok: true, responseStatus: 200, error: null, responseBody: "ok", durationMs: 12 };
const FAILED: AttemptRecord = { ok: false, responseStatus: 503, error: null, responseBody: "down", durationMs: 15 };

async function newAccount(): Promise<string> {
  const id = newId("acct");
  await pool.query("INSERT INTO accounts (id, name) VALUES ($1, $2)", [id, `delivery-state-${id}`]);
  return id;
}

async function newWebhook(accountId: string, path = "/hook"): Promise<{ id: string; url: string; testDeliveryId: string }> {
  const url = `https://receiver.example/${path.replace(/^\//, "")}`;
  const made = await registerWebhook(pool, {
    accountId,
    queuePrefix: prefix,
    url,
    events: ["message.sent"],
    secret: "stored-secret",
    maxWebhooks: 100,
  });
  if (!made) throw new Error("account at its webhook limit");
  return { id: made.webhook.id, url, testDeliveryId: made.testDeliveryId };
}

/** One message.sent event of `accountId`: its id and its destinations by webhook id. */
async function newEvent(accountId: string): Promise<{ eventId: string; destinations: Map<string, string> }> {
  const data = {
    messageId: `<${randomUUID()}@mail.example.com>`,
    threadId: "thr_1",
    inboxId: "inbox_1",
    from: "alice@example.com",
    to: ["bob@example.org"],
    subject: "Hello",
    status: "sent",
  };
  const [accepted] = await acceptEvents(pool, accountId, prefix, [{ eventType: "message.sent", data, occurredAt: new Date() }]);
  const { rows } = await pool.query<{ id: string; webhook_id: string }>("SELECT id, webhook_id FROM destinations WHERE event_id = $1", [
    accepted.id,
  ]);
  return { eventId: accepted.id, destinations: new Map(rows.map((r) => [r.webhook_id, r.id])) };
}

/** An account with one webhook and one event to it. */
async function oneDestination() {
  const accountId = await newAccount();
  const hook = await newWebhook(accountId);
  const { eventId, destinations } = await newEvent(accountId);
  const destinationId = destinations.get(hook.id)!;
  const target = (await loadDestination(pool, destinationId, 0))!;
  return { accountId, hook, eventId, destinationId, target };
}

async function eventRow(eventId: string) {
  const { rows } = await pool.query<{ status: string; pending_destinations: number; failed_destinations: number }>(
    "SELECT status::text AS status, pending_destinations, failed_destinations FROM events WHERE id = $1",
    [eventId],
  );
  return rows[0];
}

async function count(sqlText: string, values: unknown[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(sqlText, values);
  return rows[0].n;
}

const deliveryRows = (filter: string, id: string) => count(`SELECT count(*)::int AS n FROM deliveries WHERE ${filter} = $1`, [id]);
const auditRows = (replayId: string) => count("SELECT count(*)::int AS n FROM audit_entries WHERE replay_id = $1", [replayId]);

describe("destination attempts", () => {
  test("recording the same (destination, attempt) twice, also at once, writes one row and keeps the first", async () => {
    const { destinationId, target } = await oneDestination();
    await Promise.all([
      recordDestinationAttempt(pool, target, 0, FAILED, "retry"),
      recordDestinationAttempt(pool, target, 0, { ...FAILED, responseStatus: 500 }, "retry"),
    ]);
    await recordDestinationAttempt(pool, target, 0, FAILED, "retry");
    const { rows } = await pool.query("SELECT trigger::text AS trigger, attempt FROM deliveries WHERE destination_id = $1", [
      destinationId,
    ]);
    expect(rows).toEqual([{ trigger: "initial", attempt: 0 }]);
    // Retry 1 is another attempt: a row of its own.
    await recordDestinationAttempt(pool, target, 1, FAILED, "retry");
    await recordDestinationAttempt(pool, target, 1, FAILED, "retry");
    expect(await deliveryRows("destination_id", destinationId)).toBe(2);
  });

  test("an attempt a dead dispatcher already recorded is reported as recorded, with its outcome, and recording it again changes nothing", async () => {
    const { destinationId, eventId, target } = await oneDestination();
    expect(target.recorded).toBeNull();
    // The dispatcher recorded attempt 0 (failed, retry scheduled), then died before its job ended.
    await recordDestinationAttempt(pool, target, 0, FAILED, "retry");
    const again = (await loadDestination(pool, destinationId, 0))!;
    expect(again.recorded).toEqual({ ok: false });
    expect(again.status).toBe("pending");
    // The next attempt number has no row yet: it is sent.
    expect((await loadDestination(pool, destinationId, 1))!.recorded).toBeNull();

    // Retry 1 succeeded and was recorded; its job runs again and finds it.
    await recordDestinationAttempt(pool, target, 1, OK, "delivered");
    const done = (await loadDestination(pool, destinationId, 1))!;
    expect(done.recorded).toEqual({ ok: true });
    expect(done.status).toBe("delivered");
    // What deliverDestination records for a recorded attempt (no new answer): the row stays the first one.
    await recordDestinationAttempt(pool, target, 1, { ok: true, responseStatus: null, error: null, durationMs: 0 }, "delivered");
    const { rows } = await pool.query(
      "SELECT attempt, response_status, response_body FROM deliveries WHERE destination_id = $1 ORDER BY attempt",
      [destinationId],
    );
    expect(rows).toEqual([
      { attempt: 0, response_status: 503, response_body: "down" },
      { attempt: 1, response_status: 200, response_body: "ok" },
    ]);
    expect(await eventRow(eventId)).toEqual({ status: "delivered", pending_destinations: 0, failed_destinations: 0 });
  });

  test("auto-disable counts rows written: a failed attempt recorded again does not grow the failing streak", async () => {
    const accountId = await newAccount();
    const hook = await newWebhook(accountId);
    const first = await newEvent(accountId);
    const second = await newEvent(accountId);
    const targetOf = async (e: { destinations: Map<string, string> }) => (await loadDestination(pool, e.destinations.get(hook.id)!, 0))!;
    const streakOf = async () =>
      (
        await pool.query<{ failing_events: number; failing_since: Date | null }>(
          "SELECT failing_events, failing_since FROM webhooks WHERE id = $1",
          [hook.id],
        )
      ).rows[0];

    const a = await targetOf(first);
    const streak = await recordDestinationAttempt(pool, a, 0, FAILED, "retry");
    expect(streak?.events).toBe(1);
    const since = (await streakOf()).failing_since;
    // The same job again (its dispatcher died after writing): no row written, nothing counted.
    expect(await recordDestinationAttempt(pool, a, 0, FAILED, "retry")).toBeNull();
    expect(
      (await recordDestinationAttempts(pool, [{ destination: a, attempt: 0, result: FAILED, outcome: "retry" }])).map((r) => r.streak),
    ).toEqual([null]);
    expect(await streakOf()).toEqual({ failing_events: 1, failing_since: since });
    // In one batch with a new failure of another event: only the new one counts.
    const b = await targetOf(second);
    await recordDestinationAttempts(pool, [
      { destination: a, attempt: 0, result: FAILED, outcome: "retry" },
      { destination: b, attempt: 0, result: FAILED, outcome: "retry" },
    ]);
    expect((await streakOf()).failing_events).toBe(2);
    // A retry's failure is not a new event; a success clears the streak.
    await recordDestinationAttempt(pool, a, 1, FAILED, "retry");
    expect((await streakOf()).failing_events).toBe(2);
    await recordDestinationAttempt(pool, b, 1, OK, "delivered");
    expect(await streakOf()).toEqual({ failing_events: 0, failing_since: null });
  });
});

describe("scheduler leases (docs/scheduler.md)", () => {
  test("an attempt that ends its destination ends its lease in the same statement and says so; a retry keeps it", async () => {
    const { destinationId, hook, target } = await oneDestination();
    // The relay's lease for this destination's job.
    await pool.query(
      "INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name) VALUES ($1, $2, $3, $4, 'deliver-destination')",
      [destinationId, prefix, hook.id, target.accountId],
    );
    const leases = () => count("SELECT count(*)::int AS n FROM webhook_leases WHERE work_id = $1", [destinationId]);
    const retry = await recordDestinationAttempts(pool, [{ destination: target, attempt: 0, result: FAILED, outcome: "retry" }]);
    expect(retry.map((r) => r.leaseEnded)).toEqual([false]);
    expect(await leases()).toBe(1);
    const ended = await recordDestinationAttempts(pool, [{ destination: target, attempt: 1, result: OK, outcome: "delivered" }]);
    expect(ended).toEqual([{ streak: null, leaseEnded: true }]);
    expect(await leases()).toBe(0);
  });

  test("an attempt that ends its destination while the relay's claim is not committed finds no lease and says so; releasing it later ends it", async () => {
    const { destinationId, hook, target } = await oneDestination();
    const leases = () => count("SELECT count(*)::int AS n FROM webhook_leases WHERE work_id = $1", [destinationId]);
    // The relay's transaction: the lease written, Redis has the job, the COMMIT not yet sent.
    const relay = await pool.connect();
    try {
      await relay.query("BEGIN");
      await relay.query(
        "INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name) VALUES ($1, $2, $3, $4, 'deliver-destination')",
        [destinationId, prefix, hook.id, target.accountId],
      );
      const [recorded] = await recordDestinationAttempts(pool, [{ destination: target, attempt: 0, result: OK, outcome: "delivered" }]);
      expect(recorded).toEqual({ streak: null, leaseEnded: false });
      await relay.query("COMMIT");
    } finally {
      relay.release();
    }
    // The lease outlives its work until someone ends it again.
    expect(await leases()).toBe(1);
    expect(await releaseLeases(pool, [destinationId, "dst_never_leased"])).toEqual(["dst_never_leased"]);
    expect(await leases()).toBe(0);
  });
});

describe("replays", () => {
  async function replayOf(
    target: Pick<LoadedDestination, "webhookId" | "destinationId" | "url">,
    accountId: string,
    eventId: string,
    url = target.url,
    hasTargetUrl = url !== target.url,
  ) {
    const [accepted] = await acceptReplays(pool, {
      accountId,
      apiKeyId: "key_test",
      eventId,
      queuePrefix: prefix,
      targets: [
        {
          webhookId: target.webhookId,
          destinationId: target.destinationId,
          destinationUrl: url,
          toOwnUrl: url === target.url,
          hasTargetUrl,
        },
      ],
    });
    return (await loadReplay(pool, accepted.replayId))!;
  }

  test("a replay job that runs twice, also at once, writes one delivery row and one audit entry; a success to the own URL delivers the destination", async () => {
    const { accountId, eventId, destinationId, target } = await oneDestination();
    await recordDestinationAttempts(
      pool,
      [0, 1, 2, 3].map((attempt) => ({ destination: target, attempt, result: FAILED, outcome: attempt === 3 ? "failed" : "retry" })),
    );
    expect((await eventRow(eventId)).status).toBe("failed");

    const replay = await replayOf(target, accountId, eventId);
    expect(replay).toMatchObject({ status: "pending", toOwnUrl: true, webhookEnabled: true });
    expect(replayCancelled(replay)).toBe(false);
    await Promise.all([recordReplayAttempt(pool, replay, OK), recordReplayAttempt(pool, replay, OK)]);
    await recordReplayAttempt(pool, replay, FAILED);
    expect(await deliveryRows("replay_id", replay.replayId)).toBe(1);
    expect(await auditRows(replay.replayId)).toBe(1);
    const { rows } = await pool.query("SELECT response_status, error, api_key_id FROM audit_entries WHERE replay_id = $1", [
      replay.replayId,
    ]);
    expect(rows).toEqual([{ response_status: 200, error: null, api_key_id: "key_test" }]);
    expect((await loadReplay(pool, replay.replayId))!.status).toBe("delivered");
    expect((await loadDestination(pool, destinationId, 0))!.status).toBe("delivered");
    expect(await eventRow(eventId)).toEqual({ status: "delivered", pending_destinations: 0, failed_destinations: 0 });
  });

  test("a replay to its own URL whose webhook was disabled or deleted after acceptance ends cancelled: no delivery row, one audit entry 'cancelled'", async () => {
    for (const end of ["disable", "delete"] as const) {
      const { accountId, hook, eventId, destinationId, target } = await oneDestination();
      await recordDestinationAttempt(pool, target, 0, OK, "delivered");
      const own = await replayOf(target, accountId, eventId);
      const override = await replayOf(target, accountId, eventId, "https://elsewhere.example/replay");
      // A target_url equal to the webhook's own URL is still a replay with a target_url.
      const ownByTargetUrl = await replayOf(target, accountId, eventId, target.url, true);
      if (end === "disable") expect(await changeWebhook(pool, accountId, hook.id, { status: "disabled" })).not.toBeNull();
      else expect(await deleteWebhook(pool, accountId, hook.id)).toBe(true);

      const atAttempt = (await loadReplay(pool, own.replayId))!;
      expect(atAttempt.webhookEnabled).toBe(false);
      expect(replayCancelled(atAttempt)).toBe(true);
      // An override URL is still sent: the disabled webhook's secret signs it.
      expect(replayCancelled((await loadReplay(pool, override.replayId))!)).toBe(false);
      expect(replayCancelled((await loadReplay(pool, ownByTargetUrl.replayId))!)).toBe(false);

      await Promise.all([cancelReplay(pool, atAttempt), cancelReplay(pool, atAttempt)]);
      await cancelReplay(pool, atAttempt);
      expect((await loadReplay(pool, own.replayId))!.status).toBe("cancelled");
      expect(await deliveryRows("replay_id", own.replayId)).toBe(0);
      const { rows } = await pool.query(
        "SELECT destination_url, response_status, error, api_key_id FROM audit_entries WHERE replay_id = $1",
        [own.replayId],
      );
      expect(rows).toEqual([{ destination_url: hook.url, response_status: null, error: "cancelled", api_key_id: "key_test" }]);
      // The destination keeps its own status.
      expect((await loadDestination(pool, destinationId, 0))!.status).toBe("delivered");
      // A replay that ended otherwise is not cancelled afterwards.
      await recordReplayAttempt(pool, override, OK);
      await cancelReplay(pool, override);
      expect((await loadReplay(pool, override.replayId))!.status).toBe("delivered");
      expect((await pool.query("SELECT error FROM audit_entries WHERE replay_id = $1", [override.replayId])).rows).toEqual([
        { error: null },
      ]);
    }
  });
});

describe("test deliveries", () => {
  test("cancelTestDelivery ends a pending test delivery cancelled, once, and leaves one that ended alone", async () => {
    const accountId = await newAccount();
    const hook = await newWebhook(accountId);
    expect(await changeWebhook(pool, accountId, hook.id, { status: "disabled" })).not.toBeNull();
    const pending = (await loadTestDelivery(pool, hook.testDeliveryId))!;
    expect(pending).toMatchObject({ status: "pending", webhookEnabled: false });
    await cancelTestDelivery(pool, hook.testDeliveryId);
    await cancelTestDelivery(pool, hook.testDeliveryId);
    expect((await loadTestDelivery(pool, hook.testDeliveryId))!.status).toBe("cancelled");
    expect(await deliveryRows("test_delivery_id", hook.testDeliveryId)).toBe(0);
    // Recording an attempt afterwards (a job that loaded it before) does not revive it.
    await recordTestAttempt(pool, pending, OK);
    expect((await loadTestDelivery(pool, hook.testDeliveryId))!.status).toBe("cancelled");

    const other = await newWebhook(accountId, "/other");
    const sent = (await loadTestDelivery(pool, other.testDeliveryId))!;
    await recordTestAttempt(pool, sent, OK);
    await recordTestAttempt(pool, sent, OK);
    expect(await deliveryRows("test_delivery_id", other.testDeliveryId)).toBe(1);
    await cancelTestDelivery(pool, other.testDeliveryId);
    expect((await loadTestDelivery(pool, other.testDeliveryId))!.status).toBe("delivered");
  });
});

describe("status rules (docs/api.md, 'Statuses')", () => {
  /** An account with `n` webhooks and one event to all of them: the event id and its destination targets. */
  async function fanOut(n: number) {
    const accountId = await newAccount();
    const hooks = [];
    for (let i = 0; i < n; i++) hooks.push(await newWebhook(accountId, `/h${i}`));
    const { eventId, destinations } = await newEvent(accountId);
    const targets = await Promise.all(hooks.map(async (h) => (await loadDestination(pool, destinations.get(h.id)!, 0))!));
    return { accountId, hooks, eventId, targets };
  }

  /** The event's stored status agrees with the rule applied to its destinations' rows. */
  async function expectStatus(eventId: string, expected: string) {
    const { rows } = await pool.query<{ status: string }>("SELECT status::text AS status FROM destinations WHERE event_id = $1", [eventId]);
    const pending = rows.filter((r) => r.status === "pending").length;
    const failed = rows.filter((r) => r.status === "failed" || r.status === "cancelled").length;
    expect(eventStatus(pending, failed)).toBe(expected);
    expect(await eventRow(eventId)).toEqual({ status: expected, pending_destinations: pending, failed_destinations: failed });
  }

  test("pending while any destination is pending, then failed when one failed", async () => {
    const { eventId, targets } = await fanOut(3);
    await expectStatus(eventId, "pending");
    await recordDestinationAttempt(pool, targets[0], 0, OK, "delivered");
    await expectStatus(eventId, "pending");
    await recordDestinationAttempt(pool, targets[1], 0, FAILED, "failed");
    await expectStatus(eventId, "pending");
    await recordDestinationAttempt(pool, targets[2], 0, FAILED, "retry");
    await expectStatus(eventId, "pending");
    await recordDestinationAttempt(pool, targets[2], 1, OK, "delivered");
    await expectStatus(eventId, "failed");
  });

  test("delivered when every destination was delivered (ending in one batch), and with no destination at all", async () => {
    const { eventId, targets } = await fanOut(2);
    await recordDestinationAttempts(
      pool,
      targets.map((target) => ({ destination: target, attempt: 0, result: OK, outcome: "delivered" })),
    );
    await expectStatus(eventId, "delivered");
    const lonely = await newEvent(await newAccount());
    expect(lonely.destinations.size).toBe(0);
    await expectStatus(lonely.eventId, "delivered");
  });

  test("failed when one was cancelled (its webhook disabled, deleted, or found disabled by its job), the others delivered", async () => {
    const { accountId, hooks, eventId, targets } = await fanOut(4);
    await recordDestinationAttempt(pool, targets[0], 0, OK, "delivered");
    await changeWebhook(pool, accountId, hooks[1].id, { status: "disabled" });
    await expectStatus(eventId, "pending");
    await deleteWebhook(pool, accountId, hooks[2].id);
    await cancelDestination(pool, targets[3].destinationId);
    await cancelDestination(pool, targets[3].destinationId);
    await expectStatus(eventId, "failed");
    const { rows } = await pool.query(
      "SELECT webhook_id, status::text AS status FROM destinations WHERE event_id = $1 ORDER BY webhook_id",
      [eventId],
    );
    expect(rows.map((r) => r.status)).toEqual(["delivered", "cancelled", "cancelled", "cancelled"]);
    // A cancelled destination stays as it is when a late attempt (in flight while it was
    // cancelled) fails; one that succeeded wins (issue 17 item 8): see the next test.
    await recordDestinationAttempt(pool, targets[3], 0, FAILED, "retry");
    await recordDestinationAttempt(pool, targets[3], 1, FAILED, "failed");
    await expectStatus(eventId, "failed");
    expect((await loadDestination(pool, targets[3].destinationId, 0))!.status).toBe("cancelled");
  });

  test("a success wins over a concurrent disable or delete: an attempt in flight while its destination was cancelled, answered 2xx, delivers it, and the event follows", async () => {
    const { accountId, hooks, eventId, targets } = await fanOut(3);
    await recordDestinationAttempt(pool, targets[0], 0, OK, "delivered");
    // The attempts of targets 1 and 2 are in flight when their webhooks are disabled and deleted.
    await changeWebhook(pool, accountId, hooks[1].id, { status: "disabled" });
    await deleteWebhook(pool, accountId, hooks[2].id);
    await expectStatus(eventId, "failed");
    await recordDestinationAttempt(pool, targets[1], 0, OK, "delivered");
    await expectStatus(eventId, "failed");
    // Recorded twice (its job ran again): counted once.
    await recordDestinationAttempts(pool, [{ destination: targets[2], attempt: 0, result: OK, outcome: "delivered" }]);
    await recordDestinationAttempts(pool, [{ destination: targets[2], attempt: 0, result: OK, outcome: "delivered" }]);
    await expectStatus(eventId, "delivered");
    const { rows } = await pool.query("SELECT status::text AS status FROM destinations WHERE event_id = $1", [eventId]);
    expect(rows.map((r) => r.status)).toEqual(["delivered", "delivered", "delivered"]);
  });

  test("a successful replay to its own URL delivers a failed or cancelled destination, and the event follows", async () => {
    const { accountId, hooks, eventId, targets } = await fanOut(2);
    await recordDestinationAttempt(pool, targets[0], 0, FAILED, "failed");
    await changeWebhook(pool, accountId, hooks[1].id, { status: "disabled" });
    await expectStatus(eventId, "failed");
    await changeWebhook(pool, accountId, hooks[1].id, { status: "enabled" });
    for (const target of targets) {
      const [accepted] = await acceptReplays(pool, {
        accountId,
        apiKeyId: "key_test",
        eventId,
        queuePrefix: prefix,
        targets: [
          {
            webhookId: target.webhookId,
            destinationId: target.destinationId,
            destinationUrl: target.url,
            toOwnUrl: true,
            hasTargetUrl: false,
          },
        ],
      });
      await recordReplayAttempt(pool, (await loadReplay(pool, accepted.replayId))!, OK);
    }
    await expectStatus(eventId, "delivered");
  });
});

describe("work that cannot be carried out ends with a row that says why (docs/api.md, 'Deliveries log')", () => {
  test("failWithoutAttempt: a destination gets an internal_error row at its next attempt number, a replay its row and audit entry, a test delivery its row; once", async () => {
    const { accountId, hook, eventId, destinationId, target } = await oneDestination();
    await recordDestinationAttempt(pool, target, 0, FAILED, "retry");
    await Promise.all([failWithoutAttempt(pool, "delivery", destinationId), failWithoutAttempt(pool, "delivery", destinationId)]);
    const rows = await pool.query(
      "SELECT trigger::text, attempt, response_status, error FROM deliveries WHERE destination_id = $1 ORDER BY attempt",
      [destinationId],
    );
    expect(rows.rows).toEqual([
      { trigger: "initial", attempt: 0, response_status: 503, error: null },
      { trigger: "retry", attempt: 1, response_status: null, error: "internal_error" },
    ]);
    expect(await eventRow(eventId)).toEqual({ status: "failed", pending_destinations: 0, failed_destinations: 1 });

    const [accepted] = await acceptReplays(pool, {
      accountId,
      apiKeyId: "key_test",
      eventId,
      queuePrefix: prefix,
      targets: [{ webhookId: hook.id, destinationId, destinationUrl: hook.url, toOwnUrl: true, hasTargetUrl: false }],
    });
    await failWithoutAttempt(pool, "replay", accepted.replayId);
    await failWithoutAttempt(pool, "replay", accepted.replayId);
    expect((await loadReplay(pool, accepted.replayId))!.status).toBe("failed");
    expect((await pool.query("SELECT trigger::text, url, error FROM deliveries WHERE replay_id = $1", [accepted.replayId])).rows).toEqual([
      { trigger: "replay", url: hook.url, error: "internal_error" },
    ]);
    expect(
      (
        await pool.query("SELECT destination_url, response_status, error, api_key_id FROM audit_entries WHERE replay_id = $1", [
          accepted.replayId,
        ])
      ).rows,
    ).toEqual([{ destination_url: hook.url, response_status: null, error: "internal_error", api_key_id: "key_test" }]);

    await failWithoutAttempt(pool, "test-delivery", hook.testDeliveryId);
    await failWithoutAttempt(pool, "test-delivery", hook.testDeliveryId);
    expect((await loadTestDelivery(pool, hook.testDeliveryId))!.status).toBe("failed");
    expect(
      (await pool.query("SELECT id, trigger::text, event_id, error FROM deliveries WHERE test_delivery_id = $1", [hook.testDeliveryId]))
        .rows,
    ).toEqual([{ id: testDeliveryRowId(hook.testDeliveryId), trigger: "test", event_id: null, error: "internal_error" }]);
  });
});

describe("one clock: rows are stamped by PostgreSQL when they are written (issue 17 item 9)", () => {
  test("delivery rows of every trigger and audit entries carry the writing transaction's now()", async () => {
    const { accountId, hook, eventId, destinationId, target } = await oneDestination();
    const [accepted] = await acceptReplays(pool, {
      accountId,
      apiKeyId: "key_test",
      eventId,
      queuePrefix: prefix,
      targets: [{ webhookId: hook.id, destinationId, destinationUrl: hook.url, toOwnUrl: true, hasTargetUrl: false }],
    });
    const replay = (await loadReplay(pool, accepted.replayId))!;
    const testDelivery = (await loadTestDelivery(pool, hook.testDeliveryId))!;
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const {
        rows: [{ now }],
      } = await client.query<{ now: Date }>("SELECT now()::timestamptz(3) AS now");
      // Written well after the transaction began: a stamp from any other clock would differ.
      await new Promise((r) => setTimeout(r, 50));
      await recordDestinationAttempt(client, target, 0, OK, "delivered");
      await recordReplayAttempt(client, replay, OK);
      await recordTestAttempt(client, testDelivery, OK);
      await client.query("COMMIT");
      const stamps = await pool.query<{ at: Date }>(
        `SELECT created_at AS at FROM deliveries WHERE destination_id = $1 OR test_delivery_id = $2
         UNION ALL SELECT replayed_at FROM audit_entries WHERE replay_id = $3`,
        [destinationId, hook.testDeliveryId, accepted.replayId],
      );
      expect(stamps.rows.map((r) => r.at.getTime())).toEqual([now.getTime(), now.getTime(), now.getTime(), now.getTime()]);
    } finally {
      client.release();
    }
  });
});

describe("large payloads (issue 17 item 2)", () => {
  test("loadPayload reads a payload over INLINE_PAYLOAD_BYTES slice by slice, byte for byte", async () => {
    const accountId = await newAccount();
    // Multi-byte characters (one emoji is two UTF-16 units) on every slice boundary.
    const body = "é 🎉 line\n".repeat(Math.ceil((2.5 * PAYLOAD_READ_CHARS) / 10));
    const data = {
      messageId: "<big@mail.example.com>",
      threadId: "thr_1",
      inboxId: "inbox_1",
      from: "alice@example.com",
      to: ["bob@example.org"],
      subject: "Big",
      body,
      headers: { messageId: "<big@mail.example.com>", inReplyTo: "", references: "" },
    };
    const [accepted] = await acceptEvents(pool, accountId, prefix, [{ eventType: "message.received", data, occurredAt: new Date() }]);
    const stored = (await pool.query<{ payload: string }>("SELECT payload FROM event_payloads WHERE event_id = $1", [accepted.id])).rows[0]
      .payload;
    const bytes = await loadPayload(pool, accepted.id);
    expect(bytes!.equals(Buffer.from(stored, "utf8"))).toBe(true);
    expect(bytes!.length).toBeGreaterThan(INLINE_PAYLOAD_BYTES);
    expect(await loadPayload(pool, "evt_00000000000000000000000000000000")).toBeNull();
  });
});
