import { randomUUID } from "node:crypto";
import { jest } from "@jest/globals";
import type pg from "pg";
import { createPool, newId } from "@mailhooks/db";
import { acceptEvents, createEventAcceptor, type EventInput } from "./ingest.js";

/**
 * Accepting events against the test database: one clock (PostgreSQL's) for every time ingest
 * writes, and the scope of a webhook (`inbox_ids`, docs/api.md, "Webhooks"). Each test makes its
 * own account; the work queue rows carry a queue prefix of this file's own and are removed at the end.
 */
const pool: pg.Pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 4);
const prefix = `test-ingest-${randomUUID()}`;

afterAll(async () => {
  await pool.query("DELETE FROM work_items WHERE queue_prefix = $1", [prefix]);
  await pool.end();
});

afterEach(() => jest.useRealTimers());

async function newAccount(): Promise<string> {
  const id = newId("acct");
  await pool.query("INSERT INTO accounts (id, name) VALUES ($1, $2)", [id, `ingest-${id}`]);
  return id;
}

/** A webhook of `accountId` subscribed to message.sent, scoped to `inboxIds` (null: every inbox). */
async function newWebhook(accountId: string, inboxIds: string[] | null): Promise<string> {
  const id = newId("wh");
  await pool.query(
    `INSERT INTO webhooks (id, account_id, url, events, secret, inbox_ids) VALUES ($1, $2, 'https://receiver.example/hook', '{message.sent}', 'stored-secret', $3)`,
    [id, accountId, inboxIds],
  );
  return id;
}

function sent(inboxId = "inbox_1"): EventInput {
  const data = {
    messageId: `<${randomUUID()}@mail.example.com>`,
    threadId: "thr_1",
    inboxId,
    from: "alice@example.com",
    to: ["bob@example.org"],
    subject: "Hello",
    status: "sent",
  };
  return { eventType: "message.sent", data, occurredAt: new Date("2026-11-20T10:00:00Z") };
}

/** This process's clock (Date only: timers and I/O keep running) set `offsetMs` away from the real time. */
function skewClock(offsetMs: number): void {
  jest.useFakeTimers({
    now: Date.now() + offsetMs,
    doNotFake: [
      "nextTick",
      "setImmediate",
      "clearImmediate",
      "setTimeout",
      "clearTimeout",
      "setInterval",
      "clearInterval",
      "queueMicrotask",
      "hrtime",
      "performance",
    ],
  });
}

const databaseNow = async () => (await pool.query<{ now: Date }>("SELECT now() AS now")).rows[0].now;

describe("one clock: the times ingest writes are PostgreSQL's", () => {
  test("an event's created_at (and its payload's, and its destinations') is the database's time even when the API's clock is wrong", async () => {
    const accountId = await newAccount();
    await newWebhook(accountId, null);
    const before = await databaseNow();
    skewClock(-3 * 3600_000);
    const [single] = await acceptEvents(pool, accountId, prefix, [sent()]);
    const [grouped] = await createEventAcceptor(pool, prefix).accept(accountId, [sent()]);
    jest.useRealTimers();
    const after = await databaseNow();
    for (const accepted of [single, grouped]) {
      const { rows } = await pool.query<{ created_at: Date; payload_at: Date; destination_at: Date }>(
        `SELECT e.created_at, p.created_at AS payload_at, d.created_at AS destination_at
           FROM events e JOIN event_payloads p ON p.event_id = e.id JOIN destinations d ON d.event_id = e.id WHERE e.id = $1`,
        [accepted.id],
      );
      expect(rows).toHaveLength(1);
      const [row] = rows;
      // timestamptz(3): the database's time rounded to the millisecond.
      expect(row.created_at.getTime()).toBeGreaterThanOrEqual(before.getTime() - 1);
      expect(row.created_at.getTime()).toBeLessThanOrEqual(after.getTime() + 1);
      expect(row.payload_at.getTime()).toBe(row.created_at.getTime());
      expect(row.destination_at.getTime()).toBe(row.created_at.getTime());
      expect(accepted.createdAt.getTime()).toBe(row.created_at.getTime());
    }
  });

  test("an idempotency key's 24 hours are counted on the database's clock, whichever API replica's clock is off", async () => {
    const accountId = await newAccount();
    const key = `key-${randomUUID()}`;
    const input = { ...sent(), idempotency: { key, requestHash: "hash-1" } };
    // A replica whose clock is 30 h behind takes the key first; a replica with the right time repeats it.
    skewClock(-30 * 3600_000);
    const [first] = await acceptEvents(pool, accountId, prefix, [input]);
    jest.useRealTimers();
    const [repeat] = await acceptEvents(pool, accountId, prefix, [input]);
    expect(repeat).toMatchObject({ id: first.id, created: false });
    const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE account_id = $1", [accountId]);
    expect(rows[0].n).toBe(1);
  });
});

describe("inbox_ids: a webhook's scope decides its destinations", () => {
  const destinationsOf = async (eventId: string) =>
    (
      await pool.query<{ webhook_id: string }>("SELECT webhook_id FROM destinations WHERE event_id = $1 ORDER BY webhook_id", [eventId])
    ).rows.map((r) => r.webhook_id);

  test("a scoped webhook gets only its inboxes' events; an unscoped one gets every inbox's", async () => {
    const accountId = await newAccount();
    const scoped = await newWebhook(accountId, ["inbox_a"]);
    const everyInbox = await newWebhook(accountId, null);
    const acceptor = createEventAcceptor(pool, prefix);
    const [inA, inB] = await acceptor.accept(accountId, [sent("inbox_a"), sent("inbox_b")]);
    expect(await destinationsOf(inA.id)).toEqual([scoped, everyInbox].sort());
    expect(await destinationsOf(inB.id)).toEqual([everyInbox]);
    // The work queue holds one unit of work per destination, waiting for its initial attempt.
    const { rows } = await pool.query<{ webhook_id: string; kind: string; attempt: number; leased_until: Date | null }>(
      "SELECT q.webhook_id, q.kind, q.attempt, q.leased_until FROM work_items q JOIN destinations d ON d.id = q.work_id WHERE d.event_id = $1",
      [inB.id],
    );
    expect(rows).toEqual([{ webhook_id: everyInbox, kind: "delivery", attempt: 0, leased_until: null }]);
  });

  test("an event of an inbox outside every scope has no destination and is delivered at once", async () => {
    const accountId = await newAccount();
    await newWebhook(accountId, ["inbox_a", "inbox_c"]);
    const [accepted] = await acceptEvents(pool, accountId, prefix, [sent("inbox_b")]);
    expect(accepted.status).toBe("delivered");
    expect(await destinationsOf(accepted.id)).toEqual([]);
  });
});

describe("the work queue holds only work a dispatcher can carry out", () => {
  test("a row of a kind no worker runs is refused when written (work_items_kind_check), so no claim can ever meet one", async () => {
    const accountId = await newAccount();
    const webhookId = await newWebhook(accountId, null);
    const insert = (kind: string) =>
      pool.query("INSERT INTO work_items (queue_prefix, kind, work_id, webhook_id, account_id) VALUES ($1, $2, $3, $4, $5)", [
        prefix,
        kind,
        `wrk_${randomUUID()}`,
        webhookId,
        accountId,
      ]);
    await expect(insert("bogus")).rejects.toMatchObject({ code: "23514", constraint: "work_items_kind_check" });
    await expect(insert("deliver-destination")).rejects.toMatchObject({ code: "23514" });
    const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM work_items WHERE webhook_id = $1", [webhookId]);
    expect(rows[0].n).toBe(0);
  });
});
