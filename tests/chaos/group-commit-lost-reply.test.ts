import { randomUUID } from "node:crypto";
import type pg from "pg";
import { createPool, newId } from "@mailhooks/db";
import { createEventAcceptor, type EventInput } from "@mailhooks/delivery-state";
import { testDatabaseUrl } from "../support/env.js";
import { databaseUrlVia } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";

/**
 * Group commit at most once (issue 17 item 6): concurrent ingests share one INSERT statement, and
 * when that statement fails each request is tried again on its own. If the statement committed
 * and only its answer was lost (the link to PostgreSQL failed right after the server answered),
 * trying again must not store the events a second time under other ids: each request's event ids
 * are fixed before the first try, the insert skips the ids already stored, and the answer reads
 * back what was stored. A TCP proxy between the acceptor's pool and PostgreSQL loses that answer
 * on purpose.
 */
describe("a group-commit statement whose answer is lost", () => {
  let proxy: TcpProxy;
  let direct: pg.Pool;
  let viaProxy: pg.Pool;
  const prefix = `test-lost-reply-${randomUUID()}`;

  beforeAll(async () => {
    const target = new URL(testDatabaseUrl());
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    direct = createPool(testDatabaseUrl(), 2);
    viaProxy = createPool(databaseUrlVia(proxy.port), 4);
  });
  afterAll(async () => {
    await direct?.query("DELETE FROM work_items WHERE queue_prefix = $1", [prefix]);
    await viaProxy?.end();
    await direct?.end();
    await proxy?.close();
  });

  const sent = (inboxId: string): EventInput => ({
    eventType: "message.sent",
    data: {
      messageId: `<${randomUUID()}@mail.example.com>`,
      threadId: "thr_1",
      inboxId,
      from: "alice@example.com",
      to: ["bob@example.org"],
      subject: "Hi",
      status: "sent",
    },
    occurredAt: new Date(),
  });

  test("stores each request's events once, and every request gets its own events back", async () => {
    const accountId = newId("acct");
    await direct.query("INSERT INTO accounts (id, name) VALUES ($1, $2)", [accountId, `lost-reply-${accountId}`]);
    const webhookId = newId("wh");
    await direct.query(
      `INSERT INTO webhooks (id, account_id, url, events, secret) VALUES ($1, $2, 'https://receiver.example/hook', '{message.sent}', 'stored-secret')`,
      [webhookId, accountId],
    );
    const acceptor = createEventAcceptor(viaProxy, prefix);
    // Warm the pool's connections (and the statement's preparation) outside the test's statement.
    await acceptor.accept(accountId, [sent("warm-up")]);

    // The acceptor's INSERT is prepared under this name: its Parse or Bind message carries it.
    const lost = proxy.loseReplyTo("delivery_state_accept_events");
    // Submitted in one tick: the five requests (one of two events) share one statement.
    const requests = [sent("inbox_1"), sent("inbox_2"), sent("inbox_3"), sent("inbox_4")].map((e) => [e]);
    requests.push([sent("inbox_5"), sent("inbox_5")]);
    const answers = await Promise.all(requests.map((events) => acceptor.accept(accountId, events)));
    await lost;

    const answered = answers.flat();
    expect(answered).toHaveLength(6);
    expect(new Set(answered.map((a) => a.id)).size).toBe(6);
    answers.forEach((accepted, i) => expect(accepted.map((a) => a.inboxId)).toEqual(requests[i].map((e) => e.data.inboxId)));
    for (const a of answered) expect(a).toMatchObject({ status: "pending", created: true });

    const { rows: events } = await direct.query<{ id: string; created_at: Date }>(
      "SELECT id, created_at FROM events WHERE account_id = $1 AND inbox_id <> 'warm-up' ORDER BY id",
      [accountId],
    );
    expect(events.map((e) => e.id)).toEqual(answered.map((a) => a.id).sort());
    // The answers read back what was stored.
    const createdAt = new Map(events.map((e) => [e.id, e.created_at.getTime()]));
    for (const a of answered) expect(a.createdAt.getTime()).toBe(createdAt.get(a.id));
    const ids = answered.map((a) => a.id);
    const count = async (query: string) => (await direct.query<{ n: number }>(query, [ids])).rows[0].n;
    expect(await count("SELECT count(*)::int AS n FROM event_payloads WHERE event_id = ANY($1)")).toBe(6);
    expect(await count("SELECT count(*)::int AS n FROM destinations WHERE event_id = ANY($1)")).toBe(6);
    expect(
      await count("SELECT count(*)::int AS n FROM work_items o JOIN destinations d ON d.id = o.work_id WHERE d.event_id = ANY($1)"),
    ).toBe(6);
  });
});
