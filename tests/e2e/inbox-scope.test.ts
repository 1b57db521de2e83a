import { readFileSync } from "node:fs";
import path from "node:path";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, envelopeOf, startHookReceiver, type CreatedHook, type HookReceiver } from "../support/hooks.js";

/**
 * A webhook's `inbox_ids` (docs/api.md, "Webhooks"): an event becomes a destination of the webhook
 * only when its `inbox_id` is in the list (null: every inbox), for every way events are accepted
 * (single, batch, raw message); a change applies to events accepted after it.
 *
 * The API's POST/PATCH of `inbox_ids` is built in parallel (another branch): until it is merged,
 * these tests set the column with SQL, as the PATCH will; the assertions are on destinations and
 * deliveries, which ingest decides.
 */
const SAMPLES = path.resolve(process.cwd(), "samples/mail");

describe("webhooks scoped to inboxes", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,600,900", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(() => stack.close());

  let acct: Account;
  let hr: HookReceiver;
  let scoped: CreatedHook;
  let everyInbox: CreatedHook;
  beforeEach(async () => {
    acct = await stack.newAccount();
    hr = await startHookReceiver(stack);
    scoped = await createHook(acct, hr, "/scoped", ["message.sent", "message.received"]);
    everyInbox = await createHook(acct, hr, "/every", ["message.sent", "message.received"]);
    // Stands in for PATCH /v1/webhooks/{id} {inbox_ids: ["inbox_a"]} (see above).
    await setInboxIds(scoped.id, ["inbox_a"]);
  });

  const setInboxIds = (webhookId: string, inboxIds: string[] | null) =>
    stack.pool.query("UPDATE webhooks SET inbox_ids = $1 WHERE id = $2", [inboxIds, webhookId]);

  /** The webhooks an event went to (its destinations), once every one of them is delivered. */
  async function destinationsOf(eventId: string): Promise<string[]> {
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
    );
    expect(detail.body.status).toBe("delivered");
    return (detail.body.destinations as { webhook_id: string }[]).map((d) => d.webhook_id).sort();
  }

  /** The inboxes of the email events that reached `hookPath`, each event once (a slow answer under load is retried). */
  const inboxesAt = (hookPath: string) =>
    [...new Set(emailArrivals(hr.receiver.arrivals, hookPath).map((a) => a.body))]
      .map((body) => JSON.parse(body).data.inboxId as string)
      .sort();

  const both = () => [scoped.id, everyInbox.id].sort();

  test("POST /v1/events: only the listed inbox's events reach the scoped webhook", async () => {
    const inA = await acct.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { inboxId: "inbox_a" }),
    });
    const inB = await acct.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { inboxId: "inbox_b" }),
    });
    expect([inA.status, inB.status]).toEqual([201, 201]);
    expect(await destinationsOf(inA.body.event_id)).toEqual(both());
    expect(await destinationsOf(inB.body.event_id)).toEqual([everyInbox.id]);
    expect(inboxesAt("/scoped")).toEqual(["inbox_a"]);
    expect(inboxesAt("/every")).toEqual(["inbox_a", "inbox_b"]);
  });

  test("POST /v1/events/batch: each item is scoped on its own", async () => {
    const events = ["inbox_b", "inbox_a", "inbox_b"].map((inboxId) => ({
      event_type: "message.sent",
      data: sampleData("message.sent", { inboxId }),
    }));
    const res = await acct.api("POST", "/v1/events/batch", { events });
    expect(res.status).toBe(201);
    const ids = (res.body.data as { event_id: string }[]).map((e) => e.event_id);
    expect(await destinationsOf(ids[0])).toEqual([everyInbox.id]);
    expect(await destinationsOf(ids[1])).toEqual(both());
    expect(await destinationsOf(ids[2])).toEqual([everyInbox.id]);
    expect(inboxesAt("/scoped")).toEqual(["inbox_a"]);
  });

  test("POST /v1/inboxes/{id}/messages: a raw message to another inbox does not reach the scoped webhook", async () => {
    const raw = readFileSync(path.join(SAMPLES, "01-welcome.eml"));
    const post = (inbox: string) => acct.api("POST", `/v1/inboxes/${inbox}/messages`, raw, { "content-type": "message/rfc822" });
    const [inA, inB] = [await post("inbox_a"), await post("inbox_b")];
    expect([inA.status, inB.status]).toEqual([201, 201]);
    expect(await destinationsOf(inA.body.event_id)).toEqual(both());
    expect(await destinationsOf(inB.body.event_id)).toEqual([everyInbox.id]);
    expect(inboxesAt("/scoped")).toEqual(["inbox_a"]);
  });

  test("inbox_ids back to null widens the webhook to every inbox, for events accepted after the change", async () => {
    const before = await acct.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { inboxId: "inbox_b" }),
    });
    expect(await destinationsOf(before.body.event_id)).toEqual([everyInbox.id]);
    // Stands in for PATCH /v1/webhooks/{id} {inbox_ids: null}.
    await setInboxIds(scoped.id, null);
    const after = await acct.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { inboxId: "inbox_b" }),
    });
    expect(await destinationsOf(after.body.event_id)).toEqual(both());
    // The earlier event is not sent to it afterwards.
    expect(await destinationsOf(before.body.event_id)).toEqual([everyInbox.id]);
    expect([...new Set(emailArrivals(hr.receiver.arrivals, "/scoped").map((a) => envelopeOf(a).data.messageId))]).toEqual([
      (await acct.api("GET", `/v1/events/${after.body.event_id}`)).body.message_id,
    ]);
  });
});
