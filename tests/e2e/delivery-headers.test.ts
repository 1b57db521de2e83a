import { randomBytes } from "node:crypto";
import { newId } from "@mailhooks/db";
import { enqueue, inTransaction, testDeliveryRowId } from "@mailhooks/delivery-state";
import { EVENT_EXAMPLES, EVENT_TYPES } from "@mailhooks/events";
import type { Arrival, Reply } from "@mailhooks/receiver";
import { createKeyring } from "@mailhooks/secrets";
import { JOB_NAMES } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import { deliveryRows, envelopeOf } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * Issue 20, delivery side (docs/api.md, "Webhooks"; docs/receivers.md): every request carries
 * X-Service-Event-Id (the event's id on the initial attempt, its retries and its replays; a test
 * request's delivery row id) and the webhook's own headers (stored encrypted with the secrets'
 * keyring: set here in the database, as the API stores them), also on a replay to an override
 * URL; a receiver that de-duplicates on X-Service-Event-Id counts two opens of one message as two
 * events; and a test request of each of the six kinds sends that kind's example data, signed,
 * with a fresh messageId and a `test` delivery row.
 */
const KEY = randomBytes(32);
const keyring = createKeyring([KEY]);
const OWN_HEADERS = { Authorization: "Bearer gateway-7f3a", "X-Tenant": "tenant-42" };

describe("X-Service-Event-Id and the webhook's own headers", () => {
  let stack: Stack;
  let acct: Account;
  const secrets = new Map<string, string>();
  const behaviors = new Map<string, (a: Arrival, nth: number) => Reply>();
  const counts = new Map<string, number>();
  let receiver: Awaited<ReturnType<Stack["startReceiver"]>>;

  beforeAll(async () => {
    stack = await startStack({ env: { SECRET_ENCRYPTION_KEYS: KEY.toString("base64"), DELIVERY_RETRY_DELAYS_MS: "200,200,200" } });
    acct = await stack.newAccount();
    receiver = await stack.startReceiver({
      secretFor: (path) => secrets.get(path.replace(/\/override$/, "")),
      dedupeBy: "event-id",
      behavior: (arrival) => {
        const nth = (counts.get(arrival.path) ?? 0) + 1;
        counts.set(arrival.path, nth);
        return behaviors.get(arrival.path)?.(arrival, nth) ?? {};
      },
    });
  });
  afterAll(() => stack?.close());

  /** A webhook at `path` whose own headers are OWN_HEADERS (its creation's test event already arrived). */
  async function hookWithHeaders(path: string, events: string[]) {
    const created = await acct.api("POST", "/v1/webhooks", { url: receiver.url(path), events });
    expect(created.status).toBe(201);
    secrets.set(path, created.body.secret);
    await receiver.waitFor((all) => all.some((a) => a.path === path && a.event === "webhook.test"));
    await stack.pool.query("UPDATE webhooks SET headers = $1 WHERE id = $2", [
      keyring.encrypt(JSON.stringify(OWN_HEADERS)),
      created.body.id,
    ]);
    return { id: created.body.id as string, url: receiver.url(path), secret: created.body.secret as string };
  }

  /** A test request of `eventType` (null: webhook.test), accepted as the API accepts one; its id. */
  async function requestTest(webhookId: string, eventType: string | null): Promise<string> {
    const id = newId("tst");
    await inTransaction(stack.pool, async (client) => {
      await client.query("INSERT INTO test_deliveries (id, account_id, webhook_id, queue_prefix, event_type) VALUES ($1, $2, $3, $4, $5)", [
        id,
        acct.accountId,
        webhookId,
        stack.prefix,
        eventType,
      ]);
      await enqueue(client, stack.prefix, [{ kind: JOB_NAMES.testDelivery, workId: id, webhookId, accountId: acct.accountId }]);
    });
    return id;
  }

  const ownHeadersOf = (a: Arrival) => [a.headers.authorization, a.headers["x-tenant"]];

  test("initial, retry, replay, override-URL replay and test requests carry the webhook's headers; X-Service-Event-Id is the event id, and the test's delivery row id", async () => {
    const hook = await hookWithHeaders("/all", ["message.sent"]);
    let failures = 0;
    // The initial attempt and the first retry fail; the second retry succeeds.
    behaviors.set("/all", (a) => (a.event === "message.sent" && failures++ < 2 ? { status: 503 } : {}));
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    const replayed = await acct.api("POST", `/v1/events/${eventId}/replay`);
    expect(replayed.status).toBe(202);
    const overridden = await acct.api("POST", `/v1/events/${eventId}/replay`, { target_url: receiver.url("/all/override") });
    expect(overridden.status).toBe(202);
    const testId = await requestTest(hook.id, null);

    const arrivals = await receiver.waitFor(
      (all) =>
        all.filter((a) => a.path.startsWith("/all") && a.event === "message.sent").length >= 5 &&
        all.filter((a) => a.path === "/all" && a.event === "webhook.test").length >= 2,
    );
    const sent = arrivals.filter((a) => a.path.startsWith("/all") && a.event === "message.sent");
    // The two replays run side by side: their order of arrival is not the test's point.
    expect(sent.map((a) => [a.path, a.verified, a.eventId, ...ownHeadersOf(a)]).sort()).toEqual(
      [
        ["/all", true, eventId, ...Object.values(OWN_HEADERS)],
        ["/all", true, eventId, ...Object.values(OWN_HEADERS)],
        ["/all", true, eventId, ...Object.values(OWN_HEADERS)],
        ...[["/all"], ["/all/override"]].map(([path]) => [path, true, eventId, ...Object.values(OWN_HEADERS)]).sort(),
      ].sort(),
    );
    // One event id: after the retry it accepted, the replay to its URL is a duplicate to it.
    expect(sent.filter((a) => a.path === "/all" && a.status === 200).map((a) => a.duplicate)).toEqual([false, true]);
    const rows = await waitUntil(
      () => deliveryRows(acct, { event_id: eventId }),
      (r) => r.length >= 5,
    );
    expect(rows.map((r) => r.trigger).sort()).toEqual(["initial", "replay", "replay", "retry", "retry"]);

    const tests = arrivals.filter((a) => a.path === "/all" && a.event === "webhook.test");
    expect(tests[0].headers.authorization).toBeUndefined(); // sent at creation, before the headers were set
    const test = tests[1];
    expect([test.verified, test.eventId, ...ownHeadersOf(test)]).toEqual([true, testDeliveryRowId(testId), ...Object.values(OWN_HEADERS)]);
    const testRow = await waitUntil(
      () => deliveryRows(acct, { webhook_id: hook.id }),
      (r) => r.some((row) => row.id === testDeliveryRowId(testId)),
    );
    expect(testRow.find((row) => row.id === testDeliveryRowId(testId))).toMatchObject({
      trigger: "test",
      event_id: null,
      response_status: 200,
    });
  });

  test("two message.opened events of one message (openCount 1 and 2) reach a receiver that de-duplicates on X-Service-Event-Id as two", async () => {
    await hookWithHeaders("/opens", ["message.opened"]);
    const messageId = `<opens-${Date.now()}@mail.example.com>`;
    const ids: string[] = [];
    for (const openCount of [1, 2]) {
      const posted = await acct.api("POST", "/v1/events", {
        event_type: "message.opened",
        data: sampleData("message.opened", { messageId, openCount }),
      });
      expect(posted.status).toBe(201);
      ids.push(posted.body.event_id);
    }
    const opens = (
      await receiver.waitFor((all) => all.filter((a) => a.path === "/opens" && a.event === "message.opened").length >= 2)
    ).filter((a) => a.path === "/opens" && a.event === "message.opened");
    expect(opens.map((a) => a.messageId)).toEqual([messageId, messageId]);
    expect(opens.map((a) => a.eventId).sort()).toEqual([...ids].sort());
    expect(opens.map((a) => a.duplicate)).toEqual([false, false]);
    expect(opens.map((a) => envelopeOf(a).data.openCount).sort()).toEqual([1, 2]);
  });

  test("a test request of each of the six kinds arrives signed with that kind's example data, a fresh messageId @example.invalid, and a `test` delivery row", async () => {
    const hook = await hookWithHeaders("/kinds", ["message.sent"]);
    const ids = new Map<string, string>();
    for (const kind of EVENT_TYPES) ids.set(kind, await requestTest(hook.id, kind));
    const arrivals = (
      await receiver.waitFor((all) => all.filter((a) => a.path === "/kinds" && a.event !== "webhook.test").length >= EVENT_TYPES.length)
    ).filter((a) => a.path === "/kinds" && a.event !== "webhook.test");
    expect(arrivals.map((a) => a.event).sort()).toEqual([...EVENT_TYPES].sort());
    const rows = await waitUntil(
      () => deliveryRows(acct, { webhook_id: hook.id }),
      (r) => r.length >= EVENT_TYPES.length + 1,
    );
    for (const arrival of arrivals) {
      const kind = arrival.event as (typeof EVENT_TYPES)[number];
      expect(verify(hook.secret, arrival.headers, arrival.body, { now: new Date(arrival.receivedAt) })).toEqual(JSON.parse(arrival.body));
      const { data } = envelopeOf(arrival);
      expect(data.messageId).toMatch(/@example\.invalid$/);
      expect(data.messageId).not.toBe(EVENT_EXAMPLES[kind].messageId);
      const expected: Record<string, unknown> = { ...EVENT_EXAMPLES[kind], messageId: data.messageId };
      if (kind === "message.received")
        expected.headers = { ...EVENT_EXAMPLES["message.received"].headers, messageId: `<${data.messageId}>` };
      expect(data).toEqual(expected);
      expect(arrival.eventId).toBe(testDeliveryRowId(ids.get(kind)!));
      expect(ownHeadersOf(arrival)).toEqual(Object.values(OWN_HEADERS));
      expect(rows.find((r) => r.id === arrival.eventId)).toMatchObject({
        trigger: "test",
        event_id: null,
        attempt: 0,
        response_status: 200,
        error: null,
      });
    }
    expect(new Set(arrivals.map((a) => envelopeOf(a).data.messageId)).size).toBe(EVENT_TYPES.length);
  });
});
