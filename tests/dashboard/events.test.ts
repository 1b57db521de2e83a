import { randomUUID } from "node:crypto";
import { createApiKey } from "@mailhooks/access";
import type { Receiver } from "@mailhooks/receiver";
import { callApi } from "../support/api-call.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { expectNoInlineCode, signIn, waitForPage, type Session } from "./support.js";

/**
 * Events, an event's page and Replay, Deliveries and the Audit log at the HTML level (docs/api.md,
 * "Events", "Replay", "Deliveries log" and "Audit log"; docs/dashboard.md): filters and cursor pages, the envelope as sent, the attempts'
 * timeline with the next retry, replays made as the session's key, hostile values rendered
 * inert, and another account's ids answering 404.
 */
describe("dashboard: events, replay and the logs", () => {
  let stack: Stack;
  let receiver: Receiver;
  const secrets = new Map<string, string>();
  const up = new Set<string>();
  beforeAll(async () => {
    // Retry 1 comes 1.5 s after a failure: long enough to see it scheduled.
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "1500,100,100", DELIVERY_TIMEOUT_MS: "2000" } });
    receiver = await stack.startReceiver({
      secretFor: (p) => secrets.get(p),
      behavior: (a) => (a.event === "webhook.test" || up.has(a.path) ? { status: 200 } : { status: 500 }),
    });
  });
  afterAll(() => stack.close());

  /** A fresh account with a webhook at a path of its own (failing until put in `up`), and a session. */
  async function setUp(
    events = ["message.sent"],
  ): Promise<{ account: Account; session: Session; path: string; webhookId: string; secret: string }> {
    const account = await stack.newAccount();
    const path = `/hook-${randomUUID()}`;
    const hook = await account.api("POST", "/v1/webhooks", { url: receiver.url(path), events });
    secrets.set(path, hook.body.secret);
    secrets.set(`${path}-override`, hook.body.secret);
    return { account, session: await signIn(stack, account), path, webhookId: hook.body.id, secret: hook.body.secret };
  }

  const publish = async (account: Account, data: Record<string, unknown> = {}, eventType = "message.sent") => {
    const res = await account.api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType, data) });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    return res.body.event_id as string;
  };

  test("Events: newest first with id, kind, inbox, message id, status and time; filters; cursor pages", async () => {
    const { account, session } = await setUp();
    const empty = await session.get("/dashboard/events");
    expect(empty.text).toContain("No events yet");
    const batch = await account.api("POST", "/v1/events/batch", {
      events: Array.from({ length: 52 }, (_, i) => ({
        event_type: i % 2 ? "message.sent" : "message.opened",
        data: sampleData(i % 2 ? "message.sent" : "message.opened", { inboxId: i < 50 ? "inbox-a" : "inbox-b" }),
      })),
    });
    expect(batch.status).toBe(201);
    const ids: string[] = batch.body.data.map((e: any) => e.event_id);
    const first = await session.get("/dashboard/events");
    const listed = [...first.text.matchAll(/href="\/dashboard\/events\/(evt_[0-9a-f]{32})"/g)].map((m) => m[1]);
    expect(listed).toHaveLength(50);
    expect(listed).toEqual(ids.slice(2).reverse()); // newest first (batch items are created in order)
    const older = /href="(\/dashboard\/events\?cursor=[^"]+)">Older/.exec(first.text)![1];
    const second = await session.get(older.replaceAll("&amp;", "&"));
    expect([...second.text.matchAll(/href="\/dashboard\/events\/(evt_[0-9a-f]{32})"/g)].map((m) => m[1])).toEqual(
      ids.slice(0, 2).reverse(),
    );
    expect(second.text).toContain(">Newest</a>");

    const byInbox = await session.get("/dashboard/events?inbox_id=inbox-b&event_type=&status=&since=&until=");
    expect([...byInbox.text.matchAll(/href="\/dashboard\/events\/(evt_[0-9a-f]{32})"/g)]).toHaveLength(2);
    expect(byInbox.text).toContain('value="inbox-b"');
    const byKind = await session.get("/dashboard/events?event_type=message.opened&status=delivered");
    expect([...byKind.text.matchAll(/href="\/dashboard\/events\/(evt_[0-9a-f]{32})"/g)]).toHaveLength(26);
    const future = await session.get(`/dashboard/events?since=${new Date(Date.now() + 3_600_000).toISOString().slice(0, 16)}`);
    expect(future.text).toContain("No event matches these filters");
    const bad = await session.get("/dashboard/events?since=yesterday&status=lost");
    expect(bad.status).toBe(422);
    expect(bad.text).toContain("Since must be an ISO 8601 timestamp.");
    expect(bad.text).toContain("Status must be pending, delivered or failed.");
    const row = new RegExp(
      `aria-label="${ids[51]}">evt_[0-9a-f]{6}…[0-9a-f]{4}</a> <button[^>]*>Copy</button></span></td>\\s*<td data-label="Kind">message.sent</td>\\s*` +
        `<td data-label="Inbox" class="address"><span class="url-text">inbox-<wbr>b</span></td>\\s*` +
        `<td data-label="Message ID"><span class="ident"><span class="clipped mono small" title="&lt;[^"]+&gt;">&lt;[^<]+&gt;</span> <button[^>]*>Copy</button></span></td>\\s*` +
        `<td data-label="Status"><span class="badge badge-(pending|failed)">(pending|failed)</span>\\s*</td>\\s*<td data-label="Created" class="when"><time datetime="`,
    );
    expect(first.text).toMatch(row);
    expectNoInlineCode(first.text);
  });

  test("a failing event's page: envelope as sent, destination, the four attempts with the next retry while scheduled, then Replay to an override URL as the session's key", async () => {
    const { account, session, path, webhookId } = await setUp();
    const eventId = await publish(account);
    const scheduled = await waitForPage(
      () => session.get(`/dashboard/events/${eventId}`),
      (t) => t.includes("Retry 1 is due"),
    );
    expect(scheduled.text).toContain(`hx-get="/dashboard/events/${eventId}/activity"`); // live while pending
    // Once final, the fragment stops asking to be polled.
    await waitForPage(
      () => session.get(`/dashboard/events/${eventId}/activity`),
      (t) => t.includes("Retry 3</strong>") && !t.includes("hx-get"),
    );
    const page = await session.get(`/dashboard/events/${eventId}`);
    expect(page.text).toContain('badge-failed">failed');
    for (const what of ["Initial attempt", "Retry 1", "Retry 2", "Retry 3"]) expect(page.text).toContain(`<strong>${what}</strong>`);
    expect(page.text.match(/500, refused by the endpoint/g)).toHaveLength(4);
    expect(page.text).toContain("Response body (first 17 bytes)");
    expect(page.text).toContain("{&quot;received&quot;:true}");
    // Payloads go by whole UTC days: kept until the end of the event's day plus 90 days.
    const created = Date.parse((await account.api("GET", `/v1/events/${eventId}`)).body.created_at);
    const keptUntil = new Date((Math.floor(created / 86_400_000) + 1 + 90) * 86_400_000).toISOString();
    expect(page.text).toContain(`kept until <time datetime="${keptUntil}"`);
    // The exact bytes sent: the stored payload, escaped but otherwise unchanged.
    const stored = (await stack.prisma.eventPayload.findFirstOrThrow({ where: { eventId } })).payload;
    const raw = /<code id="raw-bytes">([^<]*)<\/code>/.exec(page.text)![1];
    expect(
      raw.replaceAll("&quot;", '"').replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&#39;", "'").replaceAll("&amp;", "&"),
    ).toBe(stored);
    const arrived = receiver.arrivals.find((a) => a.path === path && a.event === "message.sent")!;
    expect(arrived.body).toBe(stored);
    expect(page.text).toContain(`${Buffer.byteLength(stored)} bytes, compact JSON`);
    // Replay form: the one destination's webhook is chosen; the button is labelled Replay.
    expect(page.text).toContain(`<option value="${webhookId}" selected>`);
    expect(page.text).toContain('<button type="submit">Replay</button>');

    const target = receiver.url(`${path}-override`);
    up.add(`${path}-override`);
    const replayed = await session.post(`/dashboard/events/${eventId}/replay`, { target_url: target, webhook_id: webhookId });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.location).toBe(`/dashboard/events/${eventId}?replayed=1#activity`);
    const done = await waitForPage(
      () => session.get(`/dashboard/events/${eventId}/activity`),
      (t) => t.includes("<strong>Replay</strong>") && !t.includes("hx-get"),
    );
    expect(done.text).toContain("200, delivered");
    const audit = await account.api("GET", `/v1/audit-log?event_id=${eventId}`);
    expect(audit.body.data).toEqual([
      expect.objectContaining({ destination_url: target, response_status: 200, api_key_id: account.apiKeyId }),
    ]);
    const auditPage = await session.get("/dashboard/audit-log");
    // The test account's key has no name: the page says so beside its id.
    expect(auditPage.text).toMatch(
      new RegExp(
        `<td data-label="Who"><span class="muted">\\(no name\\)</span><br><span class="small"><span class="ident"><code title="${account.apiKeyId}">`,
      ),
    );
    expect(auditPage.text).toContain(`href="/dashboard/events/${eventId}"`);
    // URLs may break after their separators (<wbr>).
    expect(auditPage.text.replaceAll("<wbr>", "")).toContain(target);
    const filtered = await session.get(`/dashboard/audit-log?event_id=${eventId}`);
    expect(filtered.text.replaceAll("<wbr>", "")).toContain(target);
    expect((await session.get("/dashboard/audit-log?event_id=evt_00000000000000000000000000000000")).text).toContain("No replay matches");

    // To the original destination once it is back: the destination and the event end delivered.
    up.add(path);
    expect((await session.post(`/dashboard/events/${eventId}/replay`, { target_url: "", webhook_id: webhookId })).status).toBe(303);
    await waitForPage(
      () => session.get(`/dashboard/events/${eventId}`),
      (t) => t.includes('badge-delivered">delivered') && !t.includes("hx-get"),
    );
  });

  test("Replay refusals in words: an http:// override, several destinations without a webhook, a purged payload", async () => {
    const { account, session, path } = await setUp(["message.opened"]);
    const second = await account.api("POST", "/v1/webhooks", { url: receiver.url(`${path}-b`), events: ["message.opened"] });
    secrets.set(`${path}-b`, second.body.secret);
    const eventId = await publish(account, {}, "message.opened");
    const insecure = await session.post(`/dashboard/events/${eventId}/replay`, { target_url: "http://example.com/x", webhook_id: "" });
    expect(insecure.status).toBe(422);
    expect(insecure.text).toContain("The override URL must be an absolute https:// URL.");
    expect(insecure.text).toContain('value="http://example.com/x"');
    const ambiguous = await session.post(`/dashboard/events/${eventId}/replay`, { target_url: receiver.url("/x"), webhook_id: "" });
    expect(ambiguous.status).toBe(409);
    // In the form's words, not the API's (which names the request field webhook_id).
    expect(ambiguous.text).toContain(
      "This event went to several webhooks: under Webhook, choose the one whose secret signs the replay to the override URL.",
    );
    expect(ambiguous.text).not.toContain("webhook_id<");
    expect(ambiguous.text).not.toMatch(/with webhook_id/);
    expect(await stack.prisma.replay.count({ where: { eventId } })).toBe(0);
    // Both destinations, each to its own URL.
    expect((await session.post(`/dashboard/events/${eventId}/replay`, { target_url: "", webhook_id: "" })).headers.location).toContain(
      "replayed=2",
    );

    await stack.pool.query("DELETE FROM event_payloads WHERE event_id = $1", [eventId]);
    const purged = await session.get(`/dashboard/events/${eventId}`);
    expect(purged.text).toContain("can no longer be replayed");
    expect(purged.text).not.toContain('<button type="submit">Replay</button>');
    const expired = await session.post(`/dashboard/events/${eventId}/replay`, { target_url: "", webhook_id: "" });
    expect(expired.status).toBe(410);
    expect(expired.text).toContain("past retention");
  });

  test("Audit log: who made a replay, as the name and the id of the key that made the sign-in link, in one row", async () => {
    const issued = await createApiKey(stack.prisma, `named-${randomUUID()}`, "ops laptop <Ann>");
    const account: Account = {
      apiKey: issued.key,
      apiKeyId: issued.id,
      accountId: issued.account_id,
      api: (method, url, body, headers, options) => callApi(stack.baseUrl, issued.key, method, url, body, headers, options),
    };
    const path = `/hook-${randomUUID()}`;
    const hook = await account.api("POST", "/v1/webhooks", { url: receiver.url(path), events: ["message.sent"] });
    secrets.set(path, hook.body.secret);
    up.add(path);
    const eventId = await publish(account);
    await waitUntil(
      () => account.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    const session = await signIn(stack, account);
    expect((await session.post(`/dashboard/events/${eventId}/replay`, { target_url: "", webhook_id: "" })).status).toBe(303);
    await waitUntil(
      () => account.api("GET", "/v1/audit-log"),
      (r) => r.body.data.length === 1,
    );
    const page = await session.get("/dashboard/audit-log");
    const rows = page.text.match(/<tr>[\s\S]*?<\/tr>/g)!.filter((row) => row.includes(`href="/dashboard/events/${eventId}"`));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain(
      `<td data-label="Who">ops laptop &lt;Ann&gt;<br><span class="small"><span class="ident"><code title="${issued.id}">`,
    );
    expect(rows[0]).not.toContain("(no name)");
  });

  test("Deliveries: every attempt, filterable by event and by webhook", async () => {
    const { account, session, path, webhookId } = await setUp();
    up.add(path);
    const other = await account.api("POST", "/v1/webhooks", { url: receiver.url(`${path}-other`), events: ["message.bounced"] });
    secrets.set(`${path}-other`, other.body.secret);
    up.add(`${path}-other`);
    const sent = await publish(account);
    const bounced = await publish(account, {}, "message.bounced");
    await waitUntil(
      () => account.api("GET", "/v1/deliveries"),
      (r) => r.body.data.length === 4,
    );
    const all = await session.get("/dashboard/deliveries");
    expect(all.text.match(/<tr>\s*<td data-label="Time" class="when"><time/g)).toHaveLength(4);
    expect(all.text.match(/test event<\/span>/g)).toHaveLength(2);
    const byEvent = await session.get(`/dashboard/deliveries?event_id=${sent}&webhook_id=`);
    expect(byEvent.text.match(/<tr>\s*<td data-label="Time" class="when"><time/g)).toHaveLength(1);
    expect(byEvent.text).toContain(`href="/dashboard/events/${sent}"`);
    const byWebhook = await session.get(`/dashboard/deliveries?webhook_id=${other.body.id}`);
    expect(byWebhook.text.match(/<tr>\s*<td data-label="Time" class="when"><time/g)).toHaveLength(2);
    expect(byWebhook.text).toContain(`href="/dashboard/events/${bounced}"`);
    expect(byWebhook.text).toContain(`<option value="${other.body.id}" selected>`);
    expect(byWebhook.text).not.toContain(`href="/dashboard/events/${sent}"`);
    expect((await session.get(`/dashboard/deliveries?webhook_id=${webhookId}&event_id=${bounced}`)).text).toContain("No delivery matches");
  });

  test("hostile values are rendered inert: a <script> subject, quotes and markup in inbox and message ids, a javascript: URL", async () => {
    const { account, session, path } = await setUp();
    up.add(path);
    const inbox = `in"box'<img src=x onerror=alert(1)>`;
    const eventId = await publish(account, {
      subject: "<script>alert('subject')</script>",
      inboxId: inbox,
      messageId: `<"><svg onload=alert(2)>@x>`,
    });
    await waitUntil(
      () => account.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    for (const page of [
      await session.get("/dashboard/events"),
      await session.get(`/dashboard/events/${eventId}`),
      await session.get(`/dashboard/events?inbox_id=${encodeURIComponent(inbox)}`),
      await session.get(`/dashboard/deliveries?event_id=${encodeURIComponent('"><script>alert(3)</script>')}`),
      await session.get(`/dashboard/events?inbox_id=${encodeURIComponent('x" autofocus onfocus="alert(4)')}`),
    ]) {
      expect(page.text).not.toMatch(/<script>alert|<img src=x|<svg onload|onfocus="alert/);
      expectNoInlineCode(page.text);
    }
    const detail = await session.get(`/dashboard/events/${eventId}`);
    expect(detail.text).toContain("&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;");
    // The inbox may break after its separators (<wbr>), and is escaped.
    expect(detail.text.replaceAll("<wbr>", "")).toContain("in&quot;box&#39;&lt;img src=x onerror=alert(1)&gt;");
    const filtered = await session.get(`/dashboard/events?inbox_id=${encodeURIComponent(inbox)}`);
    expect(filtered.text).toContain(`value="in&quot;box&#39;&lt;img src=x onerror=alert(1)&gt;"`);
    expect(filtered.text).toContain(`href="/dashboard/events/${eventId}"`);
    // The pager and the bulk-replay link carry the filter URL-encoded.
    expect(filtered.text).toContain("inbox_id=in%22box%27%3Cimg");
    const js = await session.post(`/dashboard/events/${eventId}/replay`, { target_url: "javascript:alert(5)", webhook_id: "" });
    expect(js.status).toBe(422);
    expect(js.text).not.toMatch(/href="javascript:/);
  });

  test("another account's event answers 404 on its page, its activity and Replay, and nothing is replayed", async () => {
    const { account } = await setUp();
    const eventId = await publish(account);
    const { session: intruder } = await setUp();
    for (const path of [`/dashboard/events/${eventId}`, `/dashboard/events/${eventId}/activity`]) {
      const res = await intruder.get(path);
      expect([path, res.status]).toEqual([path, 404]);
    }
    const replay = await intruder.post(`/dashboard/events/${eventId}/replay`, { target_url: "", webhook_id: "" });
    expect(replay.status).toBe(404);
    expect(replay.text).toContain("There is nothing here for your account");
    const bulk = await intruder.post("/dashboard/bulk-replay/replay", { event_id: eventId });
    expect(bulk.body).toMatchObject({ event_id: eventId, outcome: "failed", message: "event not found" });
    expect(await stack.prisma.replay.count({ where: { eventId } })).toBe(0);
    expect((await intruder.get(`/dashboard/deliveries?event_id=${eventId}`)).text).toContain("No delivery matches");
    expect((await intruder.get(`/dashboard/audit-log?event_id=${eventId}`)).text).toContain("No replay matches");
  });

  test("bulk replay: the count first, then one replay request per event (CSRF-checked), expired ones reported as such", async () => {
    const { account, session, path, webhookId } = await setUp();
    const ids = [await publish(account), await publish(account), await publish(account)];
    await waitUntil(
      () => account.api("GET", "/v1/events?status=failed"),
      (r) => r.body.data.length === 3,
      30_000,
    );
    await stack.pool.query("DELETE FROM event_payloads WHERE event_id = $1", [ids[0]]);
    const form = await session.get("/dashboard/bulk-replay");
    expect(form.text).toContain('<option value="failed" selected>');
    expect(form.text).toContain('<script src="/dashboard/assets/bulk-replay.js" defer></script>');
    expect(form.text).toContain('<form method="post" action="/dashboard/bulk-replay"');

    // A link can carry filters, never where the replays go: a crafted link pre-fills no URL and
    // no webhook, and counts nothing (counting is a POST with the session's token).
    const crafted = await session.get(
      `/dashboard/bulk-replay?status=failed&event_type=message.sent&target_url=${encodeURIComponent("https://evil.example/collect")}&webhook_id=${webhookId}&count=1`,
    );
    expect(crafted.status).toBe(200);
    expect(crafted.text).not.toContain("evil.example");
    expect(crafted.text).not.toContain(`<option value="${webhookId}" selected>`);
    expect(crafted.text).not.toContain("events match");
    expect(crafted.text).toContain('<option value="message.sent" selected>');
    const forged = await session.post("/dashboard/bulk-replay", {
      status: "failed",
      target_url: "https://evil.example/collect",
      _csrf: null,
    });
    expect(forged.status).toBe(403);
    expect(forged.text).not.toContain("evil.example");

    const counted = await session.post("/dashboard/bulk-replay", {
      status: "failed",
      event_type: "message.sent",
      inbox_id: "",
      since: "",
      until: "",
      target_url: "",
      webhook_id: "",
    });
    expect(counted.status).toBe(200);
    expect(counted.text).toContain("3 events match");
    expect(counted.text).toContain('data-query="event_type=message.sent&amp;status=failed"');
    expect(counted.text).toContain("each event's own webhooks, at their current URLs");
    // An override URL and a signing webhook are said plainly before anything starts.
    const target = receiver.url(`${path}-bulk`);
    const toOverride = await session.post("/dashboard/bulk-replay", {
      status: "failed",
      event_type: "message.sent",
      target_url: target,
      webhook_id: webhookId,
    });
    const card = /<dl class="facts" id="bulk-destination">([\s\S]*?)<\/dl>/.exec(toOverride.text)![1];
    expect(card).toMatch(new RegExp(`<dt>Sent to</dt><dd><span class="url break">${target}</span>`));
    expect(card).toMatch(
      new RegExp(
        `<dt>Signed with</dt><dd>the secret of the webhook <span class="url break">${receiver.url(path)}</span> <code class="small">${webhookId}</code>`,
      ),
    );
    expect(toOverride.text).toContain(`data-target-url="${target}" data-webhook-id="${webhookId}"`);
    const unknownWebhook = await session.post("/dashboard/bulk-replay", {
      status: "failed",
      webhook_id: "whk_00000000000000000000000000000000",
    });
    expect(unknownWebhook.status).toBe(422);
    expect(unknownWebhook.text).toContain("The webhook is not one of this account&#39;s webhooks.");
    const listed = await session.get("/dashboard/bulk-replay/ids?status=failed&event_type=message.sent");
    expect(listed.body).toEqual({ ids: [...ids].reverse(), truncated: false });
    const noToken = await session.post("/dashboard/bulk-replay/replay", { event_id: ids[1], _csrf: null });
    expect(noToken.status).toBe(403);
    up.add(path);
    const outcomes = [];
    for (const id of listed.body.ids)
      outcomes.push(
        (
          await session.post(
            "/dashboard/bulk-replay/replay",
            { event_id: id, target_url: "", webhook_id: "" },
            { accept: "application/json" },
          )
        ).body,
      );
    expect(outcomes.map((o) => o.outcome)).toEqual(["replayed", "replayed", "expired"]);
    await waitUntil(
      () => account.api("GET", "/v1/audit-log"),
      (r) => r.body.data.length === 2,
    );
    const badTarget = await session.post("/dashboard/bulk-replay", { status: "failed", target_url: "http://example.com" });
    expect(badTarget.status).toBe(422);
    expect(badTarget.text).toContain("The override URL must be an absolute https:// URL.");
  });
});
