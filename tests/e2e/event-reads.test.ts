import { READABLE_ENVELOPE_MAX_BYTES } from "../../apps/api/src/dashboard/pages/events.js";
import { TIMELINE_ATTEMPTS } from "../../apps/api/src/services/event-timeline.js";
import { signIn } from "../dashboard/support.js";
import { sampleData, startStack, type Stack } from "../support/stack.js";

/**
 * Reads are bounded (issue 17, item 5): an event with many delivery rows (about 100k replays of
 * one event happen) makes neither its dashboard page, polled every second while pending, nor
 * GET /v1/events/{id} carry them all; and the payload is answered from its stored bytes, never
 * parsed and written again (docs/api.md, "Events").
 */

/** Delivery rows of the event, each with a 4 KiB response body (the most docs/api.md, "Deliveries log", keeps). */
const ROWS = 3_000;
const BODY_BYTES = 4_096;

describe("reads of an event with many delivery rows", () => {
  let stack: Stack;
  beforeAll(async () => {
    // No dispatcher: the rows are written here, and nothing may add to them.
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack.close());

  /** An event of a fresh account with one destination and ROWS delivery rows, oldest `n1:` to newest `n<ROWS>:`. */
  async function eventWithManyAttempts() {
    const account = await stack.newAccount();
    const hook = await account.api("POST", "/v1/webhooks", { url: "https://hooks.example.com/many", events: ["message.sent"] });
    expect(hook.status).toBe(201);
    const posted = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId: string = posted.body.event_id;
    // The first row is the initial attempt (failed), the others replays; created 1 ms apart, in order.
    await stack.pool.query(
      `INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error, duration_ms, created_at, response_body)
       SELECT 'dlv_' || md5($1 || g), d.account_id, d.event_id, d.webhook_id, d.id, 'https://hooks.example.com/many',
              (CASE WHEN g = 1 THEN 'initial' ELSE 'replay' END)::"DeliveryTrigger", 0, CASE WHEN g = 1 THEN 500 ELSE 200 END, NULL, 3,
              now() - interval '1 hour' + g * interval '1 millisecond', rpad('n' || g || ':', $2, 'x')
         FROM destinations d, generate_series(1, $3::int) g
        WHERE d.event_id = $1`,
      [eventId, BODY_BYTES, ROWS],
    );
    return { account, eventId, webhookId: hook.body.id as string };
  }

  test("the event page and its activity show the newest attempts only, with the total and a link to the deliveries log; the API counts every row", async () => {
    const { account, eventId } = await eventWithManyAttempts();
    expect(TIMELINE_ATTEMPTS).toBeGreaterThan(0);
    expect(TIMELINE_ATTEMPTS).toBeLessThanOrEqual(100);

    const detail = await account.api("GET", `/v1/events/${eventId}`);
    expect(detail.status).toBe(200);
    expect(detail.body.destinations).toEqual([expect.objectContaining({ attempts: ROWS })]);
    // No attempt rows in the answer (docs/api.md, "Events": counts only): it stays small.
    expect(JSON.stringify(detail.body).length).toBeLessThan(16 * 1024);

    const session = await signIn(stack, account);
    for (const path of [`/dashboard/events/${eventId}`, `/dashboard/events/${eventId}/activity`]) {
      const page = await session.get(path);
      expect(page.status).toBe(200);
      const shown = [...page.text.matchAll(/<li class="is-(ok|bad)">/g)].length;
      expect(shown).toBe(TIMELINE_ATTEMPTS);
      // The newest ones: the last row is there, the first (oldest) is not.
      expect(page.text).toContain(`n${ROWS}:`);
      expect(page.text).toContain(`n${ROWS - TIMELINE_ATTEMPTS + 1}:`);
      expect(page.text).not.toContain(`n${ROWS - TIMELINE_ATTEMPTS}:`);
      expect(page.text).not.toContain(">n1:");
      // The total, and where to see them all.
      expect(page.text).toContain(`newest ${TIMELINE_ATTEMPTS} of ${ROWS.toLocaleString("en-US")} attempts`);
      expect(page.text).toContain(`href="/dashboard/deliveries?event_id=${eventId}"`);
      // Bounded: the shown bodies and the page around them, not 3,000 times 4 KiB.
      expect(page.text.length).toBeLessThan(TIMELINE_ATTEMPTS * BODY_BYTES * 2 + 64 * 1024);
    }
    // The link leads to the event's rows in the deliveries log.
    const log = await session.get(`/dashboard/deliveries?event_id=${eventId}`);
    expect(log.status).toBe(200);
  });

  test("the event page indents an envelope up to READABLE_ENVELOPE_MAX_BYTES only; a larger one is shown as sent, without a parse", async () => {
    const account = await stack.newAccount();
    const posted = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const eventId: string = posted.body.event_id;
    const session = await signIn(stack, account);
    const readableBlock = '<pre class="code" tabindex="0"><code>';
    expect((await session.get(`/dashboard/events/${eventId}`)).text).toContain(readableBlock);

    // A raw message's envelope may reach 10 MiB; this one is just over the bound.
    const stored = (await stack.prisma.eventPayload.findFirstOrThrow({ where: { eventId } })).payload;
    const large = stored.replace(/"subject":"[^"]*"/, `"subject":"${"s".repeat(READABLE_ENVELOPE_MAX_BYTES)}"`);
    await stack.pool.query("UPDATE event_payloads SET payload = $2 WHERE event_id = $1", [eventId, large]);
    const page = await session.get(`/dashboard/events/${eventId}`);
    expect(page.text).not.toContain(readableBlock);
    expect(page.text).toContain(`larger than ${READABLE_ENVELOPE_MAX_BYTES / 1024} KiB: it is shown as sent only`);
    expect(page.text).toContain(`${Buffer.byteLength(large)} bytes, compact JSON`);
    const raw = /<code id="raw-bytes">([^<]*)<\/code>/.exec(page.text)![1];
    const unescaped = raw
      .replaceAll("&quot;", '"')
      .replaceAll("&lt;", "<")
      .replaceAll("&gt;", ">")
      .replaceAll("&#39;", "'")
      .replaceAll("&amp;", "&");
    expect(unescaped === large).toBe(true); // (not toBe: a failure would print 256 KiB twice)
  });

  test("GET /v1/events/{id} answers the payload with the stored envelope's very bytes", async () => {
    const account = await stack.newAccount();
    const posted = await account.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { subject: "Caf\u00e9 \u2028 <b>" }),
    });
    const eventId: string = posted.body.event_id;
    const stored = (await stack.prisma.eventPayload.findFirstOrThrow({ where: { eventId } })).payload;
    const answer = await account.api("GET", `/v1/events/${eventId}`);
    expect(answer.body.payload).toEqual(JSON.parse(stored));
    const text = await (
      await fetch(`${stack.baseUrl}/v1/events/${eventId}`, { headers: { authorization: `Bearer ${account.apiKey}` } })
    ).text();
    expect(text).toContain(`"payload":${stored},`);

    // Stored text that a parse and a new serialization would not give back byte for byte (an
    // escaped é and solidus: the same JSON value): the answer still carries the stored bytes.
    const escaped = stored.replace(/"subject":"[^"]*"/, '"subject":"Caf\\u00e9 \\/ \\u2028"');
    expect(escaped).not.toBe(stored);
    await stack.pool.query("UPDATE event_payloads SET payload = $2 WHERE event_id = $1", [eventId, escaped]);
    const again = await fetch(`${stack.baseUrl}/v1/events/${eventId}`, { headers: { authorization: `Bearer ${account.apiKey}` } });
    expect(again.headers.get("content-type")).toMatch(/^application\/json; charset=utf-8/);
    const againText = await again.text();
    expect(againText).toContain(`"payload":${escaped},`);
    expect(JSON.parse(againText).payload.data.subject).toBe("Caf\u00e9 / \u2028");
    // The whole answer is still the contract's shape, checked against the OpenAPI document.
    const checked = await account.api("GET", `/v1/events/${eventId}`);
    expect(Object.keys(checked.body)).toEqual([
      "event_id",
      "event_type",
      "inbox_id",
      "message_id",
      "status",
      "occurred_at",
      "created_at",
      "payload_retained",
      "payload",
      "destinations",
    ]);
  });
});
