import { mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Account, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, envelopeOf, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { launchChromium } from "../support/browser.js";
import { dashboardLink, expectNoInlineCode, signIn, waitForPage, type Session } from "./support.js";

/**
 * The dashboard's side of pausing and operational events (docs/dashboard.md; docs/api.md,
 * "Webhooks" and "Operational events"): the webhook form offers the operational kinds in a group
 * of their own; a webhook's page has Pause and Resume (the dashboard's status form, with its CSRF
 * rule), shows `paused` and the work waiting; "Send test event" offers the operational kinds'
 * examples; the events list filters by an operational kind and shows such events (an event of
 * the account: no inbox, no Message ID). Then the same in Chromium.
 */

/** Where the browser tests put their screenshots (browser.test.ts does the same). */
const SHOTS = resolve(dirname(fileURLToPath(import.meta.url)), "../../.tmp/screenshots");

const EMAIL_KINDS = ["message.sent", "message.delivered", "message.opened", "message.clicked", "message.received", "message.bounced"];
const OPERATIONAL_KINDS = ["webhook.failing", "webhook.recovered", "webhook.disabled", "destination.failed"];

/** The HTML of the element opened by the first match of `start`, up to the first `end` after it. */
function between(html: string, start: string, end: string): string {
  const from = html.indexOf(start);
  if (from < 0) throw new Error(`not in the page: ${start}`);
  const to = html.indexOf(end, from);
  return html.slice(from, to < 0 ? undefined : to + end.length);
}

/**
 * How far the page is wider than the screen, in px. An expression rather than a function: this
 * file is type-checked without lib "dom" (only browser.test.ts and layout.test.ts have it).
 */
const overflow = (page: Page) => page.evaluate<number>("document.documentElement.scrollWidth - window.innerWidth");

const checkbox = (kind: string, checked = false) =>
  `<input type="checkbox" id="event-${kind}" name="events" value="${kind}"${checked ? " checked" : ""}><label for="event-${kind}">${kind}</label>`;

describe("dashboard: pausing and operational events", () => {
  let stack: Stack;
  let hr: HookReceiver;
  /** Paths whose receiver answers 500 to email events. */
  const failing = new Set<string>();
  let paths = 0;
  const newPath = (name: string) => `/${name}-${++paths}`;

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100" } });
    hr = await startHookReceiver(stack, (arrival) =>
      failing.has(arrival.path) && arrival.event?.startsWith("message.") ? { status: 500 } : {},
    );
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
  });

  async function freshSession(): Promise<{ session: Session; account: Account }> {
    const account = await stack.newAccount();
    return { session: await signIn(stack, account), account };
  }

  test("Add and Edit offer the operational kinds in a group of their own, each checkbox labelled with its name", async () => {
    const { session, account } = await freshSession();
    const form = await session.get("/dashboard/webhooks/new");
    expect(form.status).toBe(200);
    const email = between(form.text, '<fieldset class="kind-group" id="events-email"', "</fieldset>");
    const operational = between(form.text, '<fieldset class="kind-group" id="events-operational"', "</fieldset>");
    expect(email).toContain("<legend>Email events</legend>");
    expect(operational).toContain("<legend>Operational events</legend>");
    for (const kind of EMAIL_KINDS) {
      expect(email).toContain(checkbox(kind));
      expect(operational).not.toContain(`value="${kind}"`);
    }
    for (const kind of OPERATIONAL_KINDS) {
      expect(operational).toContain(checkbox(kind));
      expect(email).not.toContain(`value="${kind}"`);
    }
    expectNoInlineCode(form.text);

    const path = newPath("grouped");
    const created = await session.post("/dashboard/webhooks", { url: hr.url(path), events: ["message.sent", "destination.failed"] });
    expect(created.status).toBe(201);
    expect(created.text).toContain("receives message.sent, destination.failed.");
    const id = /href="\/dashboard\/webhooks\/(wh_[0-9a-f]{32})"/.exec(created.text)![1];
    hr.secrets.set(path, /<code id="secret-value">([^<]+)<\/code>/.exec(created.text)![1]);
    expect((await account.api("GET", `/v1/webhooks/${id}`)).body.events).toEqual(["message.sent", "destination.failed"]);

    const page = await session.get(`/dashboard/webhooks/${id}`);
    const edit = between(page.text, '<fieldset class="kind-group" id="events-operational"', "</fieldset>");
    expect(edit).toContain(checkbox("destination.failed", true));
    expect(edit).toContain(checkbox("webhook.failing"));
    const edited = await session.post(`/dashboard/webhooks/${id}`, { url: hr.url(path), events: ["webhook.failing", "webhook.disabled"] });
    expect(edited.status).toBe(303);
    expect((await account.api("GET", `/v1/webhooks/${id}`)).body.events).toEqual(["webhook.failing", "webhook.disabled"]);
  });

  test("Pause and Resume: the status form pauses (CSRF checked), the page shows paused and the work waiting, nothing is sent until Resume", async () => {
    const { session, account } = await freshSession();
    const path = newPath("paused");
    const hook = await createHook(account, hr, path, ["message.sent"]);
    const page = `/dashboard/webhooks/${hook.id}`;

    // Once its test event (sent at creation) is done, nothing waits.
    const enabled = await waitForPage(
      () => session.get(page),
      (t) => t.includes("0 waiting, 0 being sent"),
    );
    expect(enabled.text).toContain(
      '<input type="hidden" name="status" value="paused">\n    <button type="submit" class="secondary">Pause</button>',
    );
    expect(enabled.text).toContain('<button type="submit" class="secondary">Disable</button>');
    expect(enabled.text).not.toContain(">Resume</button>");

    // The dashboard's CSRF rule holds for Pause as for every state change.
    const forged = await session.post(`${page}/status`, { status: "paused", _csrf: null });
    expect(forged.status).toBe(403);
    expect((await account.api("GET", `/v1/webhooks/${hook.id}`)).body.status).toBe("enabled");

    const paused = await session.post(`${page}/status`, { status: "paused" });
    expect(paused.status).toBe(303);
    expect(paused.headers.location).toBe(`${page}?done=paused`);
    expect((await account.api("GET", `/v1/webhooks/${hook.id}`)).body).toMatchObject({ status: "paused", disabled_reason: null });
    const pausedPage = await session.get(paused.headers.location);
    expect(pausedPage.text).toContain("The webhook is paused: nothing is sent to its URL until you resume it");
    expect(pausedPage.text).toContain('badge-paused">paused');
    expect(pausedPage.text).toContain('<input type="hidden" name="status" value="enabled">\n    <button type="submit">Resume</button>');
    expect(pausedPage.text).toContain('<button type="submit" class="secondary">Disable</button>');
    expect(pausedPage.text).not.toContain(">Pause</button>");
    expect(pausedPage.text).not.toContain("Send test event");
    expect((await session.get("/dashboard/webhooks")).text).toContain('badge-paused">paused');
    // A test event is refused in words while paused.
    const refused = await session.post(`${page}/test`);
    expect(refused.status).toBe(409);
    expect(refused.text).toContain("The webhook is paused: resume it to send it a test event.");

    const events: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      expect(res.status).toBe(201);
      events.push(res.body.event_id as string);
    }
    const waiting = await waitForPage(
      () => session.get(page),
      (t) => t.includes("2 waiting, 0 being sent"),
    );
    expect(waiting.text).toContain("(sent when you resume it)");
    await expect(hr.receiver.waitFor((all) => emailArrivals(all, path).length > 0, 1_500)).rejects.toThrow(TIMED_OUT);

    const resumed = await session.post(`${page}/status`, { status: "enabled" });
    expect(resumed.status).toBe(303);
    expect(resumed.headers.location).toBe(`${page}?done=resumed`);
    expect((await session.get(resumed.headers.location)).text).toContain("The webhook is resumed: what waited is being sent");
    expect((await account.api("GET", `/v1/webhooks/${hook.id}`)).body.status).toBe("enabled");
    const arrived = await hr.receiver.waitFor((all) => emailArrivals(all, path).length === 2, 20_000);
    expect(
      emailArrivals(arrived, path)
        .map((a) => a.eventId)
        .sort(),
    ).toEqual([...events].sort());
    await waitForPage(
      () => session.get(page),
      (t) => t.includes("0 waiting, 0 being sent") && t.includes(">Pause</button>"),
    );
  });

  test("Send test event offers each operational kind's example, grouped apart, and sends it about this webhook", async () => {
    const { session, account } = await freshSession();
    const path = newPath("tested");
    const hook = await createHook(account, hr, path, ["message.sent"]);
    const page = await session.get(`/dashboard/webhooks/${hook.id}`);
    const menu = between(page.text, '<select id="test-kind" name="event_type">', "</select>");
    const emailGroup = between(menu, '<optgroup label="Email events">', "</optgroup>");
    const operationalGroup = between(menu, '<optgroup label="Operational events">', "</optgroup>");
    for (const kind of EMAIL_KINDS) expect(emailGroup).toContain(`<option value="${kind}">${kind} (example)</option>`);
    for (const kind of OPERATIONAL_KINDS) expect(operationalGroup).toContain(`<option value="${kind}">${kind} (example)</option>`);

    const sent = await session.post(`/dashboard/webhooks/${hook.id}/test`, { event_type: "webhook.disabled" });
    expect(sent.status).toBe(303);
    const arrivals = await hr.receiver.waitFor((all) => all.some((a) => a.path === path && a.event === "webhook.disabled" && a.verified));
    const envelope = envelopeOf(arrivals.find((a) => a.path === path && a.event === "webhook.disabled")!);
    expect(envelope.data).toEqual({ webhookId: hook.id, url: hook.url, reason: "manual" });
    const outcome = await waitForPage(
      () => session.get(`/dashboard/webhooks/${hook.id}/test-event`),
      (t) => t.includes("badge-delivered"),
    );
    expect(outcome.text).toContain("An example <code>webhook.disabled</code> envelope.");
  });

  test("the events list filters by an operational kind and shows such an event, which has no inbox and no Message ID", async () => {
    const { session, account } = await freshSession();
    const down = newPath("down");
    failing.add(down);
    const failingHook = await createHook(account, hr, down, ["message.sent"]);
    const observer = await createHook(account, hr, newPath("observer"), ["destination.failed"]);
    const sent = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const listed = await waitUntil(
      () => account.api("GET", "/v1/events?event_type=destination.failed"),
      (r) => r.body.data.length === 1,
    );
    const noticeId = listed.body.data[0].event_id as string;

    for (const list of [await session.get("/dashboard/events"), await session.get("/dashboard/events?event_type=destination.failed")]) {
      expect(list.status).toBe(200);
      const row = between(list.text, `aria-label="${noticeId}"`, "</tr>");
      expect(row).toContain('<td data-label="Kind">destination.failed</td>');
      expect(row).toContain('<td data-label="Inbox" class="address"><span class="muted" title="an event of the account">none</span></td>');
    }
    const filtered = await session.get("/dashboard/events?event_type=destination.failed");
    expect(filtered.text).not.toContain(`aria-label="${sent.body.event_id}"`);
    const kinds = between(filtered.text, '<select id="f-kind" name="event_type">', "</select>");
    expect(between(kinds, '<optgroup label="Operational events">', "</optgroup>")).toContain(
      '<option value="destination.failed" selected>destination.failed</option>',
    );
    expect(between(kinds, '<optgroup label="Email events">', "</optgroup>")).toContain(
      '<option value="message.sent">message.sent</option>',
    );

    const event = await session.get(`/dashboard/events/${noticeId}`);
    expect(event.status).toBe(200);
    expect(event.text).toContain("<dt>Kind</dt><dd>destination.failed</dd>");
    expect(event.text).toContain('<dt>Inbox</dt><dd class="break"><span class="muted">none (an event of the account)</span></dd>');
    expect(event.text).toContain('<dt>Message ID</dt><dd class="muted">none</dd>');
    expect(event.text).toContain(`href="/dashboard/webhooks/${observer.id}"`);
    expect(event.text).not.toContain(`href="/dashboard/webhooks/${failingHook.id}"`); // not sent to the webhook it is about
    expect(event.text).toContain("&quot;event&quot;: &quot;destination.failed&quot;");
  });

  describe("in Chromium", () => {
    let browser: Browser;
    beforeAll(async () => {
      await mkdir(SHOTS, { recursive: true });
      browser = await launchChromium();
    }, 30_000);
    afterAll(async () => {
      await browser?.close();
    });

    async function signedInPage(account: Account, width: number): Promise<Page> {
      const context = await browser.newContext({ viewport: { width, height: 900 }, baseURL: stack.baseUrl });
      const page = await context.newPage();
      await page.goto((await dashboardLink(account)).url);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL("**/dashboard/webhooks");
      return page;
    }

    test("add a webhook with an operational kind from its group, pause it, resume it, send an operational test event; at 375 px nothing is wider than the screen", async () => {
      const account = await stack.newAccount();
      const page = await signedInPage(account, 1280);
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(e.message));
      const path = newPath("browser");

      await page.getByRole("link", { name: "Add webhook" }).click();
      await page.getByLabel("URL", { exact: true }).fill(hr.url(path));
      await page.getByRole("group", { name: "Email events" }).getByLabel("message.sent", { exact: true }).check();
      const operational = page.getByRole("group", { name: "Operational events" });
      for (const kind of OPERATIONAL_KINDS) await operational.getByLabel(kind, { exact: true }).waitFor();
      await operational.getByLabel("destination.failed", { exact: true }).check();
      await page.getByRole("button", { name: "Save" }).click();
      await page.getByRole("heading", { name: "Webhook added" }).waitFor();
      hr.secrets.set(path, (await page.locator("#secret-value").textContent())!.trim());
      await page.getByRole("link", { name: "Go to the webhook's page" }).click();

      await page.getByRole("button", { name: "Pause", exact: true }).click();
      await page.getByText("The webhook is paused").waitFor();
      await page.locator(".facts .badge-paused").waitFor();
      const id = new URL(page.url()).pathname.split("/").pop()!;
      await page.screenshot({ path: join(SHOTS, "20-webhook-paused.png"), fullPage: true });
      expect((await account.api("GET", `/v1/webhooks/${id}`)).body.status).toBe("paused");
      await page.setViewportSize({ width: 375, height: 900 });
      expect(await overflow(page)).toBe(0);
      await page.setViewportSize({ width: 1280, height: 900 });

      await page.getByRole("button", { name: "Resume", exact: true }).click();
      await page.getByText("The webhook is resumed").waitFor();
      expect((await account.api("GET", `/v1/webhooks/${id}`)).body.status).toBe("enabled");

      await page.getByLabel("Kind").selectOption("webhook.failing");
      await page.getByRole("button", { name: "Send test event" }).click();
      await page.locator("#test-event .badge-delivered").waitFor({ timeout: 20_000 });
      await page.getByText("An example webhook.failing envelope.").waitFor();
      const arrivals = await hr.receiver.waitFor((all) => all.some((a) => a.path === path && a.event === "webhook.failing" && a.verified));
      expect(envelopeOf(arrivals.find((a) => a.path === path && a.event === "webhook.failing")!).data).toMatchObject({ webhookId: id });

      await page.setViewportSize({ width: 375, height: 900 });
      for (const url of [`/dashboard/webhooks/${id}`, "/dashboard/webhooks/new", "/dashboard/events?event_type=webhook.failing"]) {
        await page.goto(url);
        expect([url, await overflow(page)]).toEqual([url, 0]);
      }
      expect(problems).toEqual([]);
      await page.context().close();
    }, 60_000);
  });
});
