import { mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { launchChromium } from "../support/browser.js";
import { dashboardLink, expectNoInlineCode, signIn, waitForPage, type Session } from "./support.js";

/**
 * Listen webhooks in the dashboard (docs/develop-locally.md, docs/dashboard.md): a webhook with
 * `url: null` shows everywhere a webhook or a destination URL is shown, never as "null": its
 * list row and page say listen mode, when it was last pulled and what waits; its attempts and
 * replays, pulled and answered through the API as `npm run listen` does, show "(pulled by
 * listen)" in the deliveries log, the audit log and the event's attempts; its edit form has no
 * URL field; `disabled_reason: "idle"` is said in words. Then the same pages in Chromium.
 */

/** Where the browser tests put their screenshots (browser.test.ts does the same). */
const SHOTS = resolve(dirname(fileURLToPath(import.meta.url)), "../../.tmp/screenshots");

interface Pulled {
  delivery_id: string;
  event_id: string | null;
  trigger: string;
}

/** The HTML of the element opened by the first match of `start`, up to the first `end` after it. */
function between(html: string, start: string, end: string): string {
  const from = html.indexOf(start);
  if (from < 0) throw new Error(`not in the page: ${start}`);
  const to = html.indexOf(end, from);
  return html.slice(from, to < 0 ? undefined : to + end.length);
}

/** A page's text never shows a null URL as "null" (as element text, in a title or a value). */
function expectNoNull(html: string): void {
  expect(html).not.toMatch(/>\s*null\s*</);
  expect(html).not.toMatch(/(title|value|aria-label)="null"/);
  expect(html).not.toContain("<title>null");
  expectNoInlineCode(html);
}

const shortOf = (id: string) => `${id.slice(0, 9)}…${id.slice(-4)}`;

describe("dashboard: listen webhooks", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100" } });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  async function listenWebhook(account: Account, events: string[]): Promise<{ id: string; secret: string }> {
    const created = await account.api("POST", "/v1/webhooks", { url: null, mode: "listen", events });
    expect(created.status).toBe(201);
    return created.body;
  }
  const pull = async (account: Account, id: string, query = "?wait=5") => {
    const res = await account.api("GET", `/v1/webhooks/${id}/pending${query}`);
    expect(res.status).toBe(200);
    return res.body.data as Pulled[];
  };
  const answer = async (account: Account, id: string, pulled: Pulled, status: number) =>
    expect((await account.api("POST", `/v1/webhooks/${id}/pending/${pulled.delivery_id}`, { status, duration_ms: 3 })).status).toBe(200);

  test("the list, the webhook's page, its pulled attempts and replays, the logs and the edit form show it as listen, never as null", async () => {
    const account = await stack.newAccount();
    const session: Session = await signIn(stack, account);
    const hook = await listenWebhook(account, ["message.sent"]);
    const name = `listen webhook ${shortOf(hook.id)}`;
    const page = `/dashboard/webhooks/${hook.id}`;

    // Before any pull: its test event waits, and it was never pulled.
    const list = await session.get("/dashboard/webhooks");
    expect(list.status).toBe(200);
    const row = between(list.text, `<a href="${page}"`, "</tr>");
    expect(row).toContain(`title="${hook.id}">${name}</a>`);
    expect(row).toContain('listen mode, last pulled <span class="muted">never</span>');
    expectNoNull(list.text);

    const fresh = await session.get(page);
    expect(fresh.status).toBe(200);
    expect(fresh.text).toContain(`<h1 class="break">${name}</h1>`);
    expect(fresh.text).toContain(`<title>listen webhook ${hook.id} · Mailhooks dashboard</title>`);
    expect(fresh.text).toContain(`<dt>Mode</dt><dd>listen: nothing is sent; its deliveries wait until pulled by`);
    expect(fresh.text).toContain(`npm run -s listen -- --webhook ${hook.id} --forward-to http://localhost:PORT/PATH`);
    expect(fresh.text).toContain('<dt>Last pulled</dt><dd><span class="muted">never</span></dd>');
    expect(fresh.text).toContain("1 waiting to be pulled, 0 pulled and not answered yet");
    expect(fresh.text).toContain("waiting to be pulled by <code>npm run listen</code> and answered.");
    // The edit form has no URL field: a listen webhook has none.
    expect(fresh.text).not.toContain('<input id="url"');
    expect(fresh.text).toContain("A listen webhook has no URL.");
    expectNoNull(fresh.text);

    // Pulled and answered as `npm run listen` does: the test event delivered, an event refused then delivered.
    {
      const [test] = await pull(account, hook.id);
      expect(test.trigger).toBe("test");
      const held = await session.get(page);
      expect(held.text).toContain("0 waiting to be pulled, 1 pulled and not answered yet");
      expect(held.text).toMatch(/<dt>Last pulled<\/dt><dd><time datetime="[^"]+"/);
      await answer(account, hook.id, test, 204);
      await waitForPage(
        () => session.get(`${page}/test-event`),
        (t) => t.includes("badge-delivered"),
      );

      const sent = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      expect(sent.status).toBe(201);
      const eventId = sent.body.event_id as string;
      const [initial] = await pull(account, hook.id);
      expect(initial).toMatchObject({ trigger: "initial", event_id: eventId });
      await answer(account, hook.id, initial, 500);
      const [retry] = await pull(account, hook.id);
      expect(retry).toMatchObject({ trigger: "retry", event_id: eventId });
      await answer(account, hook.id, retry, 200);

      const deliveries = await session.get(`/dashboard/deliveries?webhook_id=${hook.id}`);
      expect(deliveries.status).toBe(200);
      expect(deliveries.text.match(/<span class="muted">\(pulled by listen\)<\/span>/g)).toHaveLength(3);
      expect(deliveries.text).toContain(`<option value="${hook.id}" selected>${name}</option>`);
      expect(deliveries.text).toContain("500, refused by the endpoint");
      expectNoNull(deliveries.text);

      // A replay of it waits to be pulled, then shows in the audit log.
      expect((await account.api("POST", `/v1/events/${eventId}/replay`, {})).status).toBe(202);
      const event = await session.get(`/dashboard/events/${eventId}`);
      expect(event.status).toBe(200);
      expect(event.text).toContain(`<a class="url-text" href="${page}">listen webhook wh_<wbr>`);
      expect(event.text).toContain(`<option value="${hook.id}" selected>${name}</option>`);
      expect(event.text).toContain("A replay is waiting to be pulled by listen");
      expect(event.text).toContain('<span class="url-text"><span class="muted">(pulled by listen)</span></span>');
      expectNoNull(event.text);
      const [replay] = await pull(account, hook.id);
      expect(replay).toMatchObject({ trigger: "replay", event_id: eventId });
      await answer(account, hook.id, replay, 202);
      const audit = await waitForPage(
        () => session.get(`/dashboard/audit-log?event_id=${eventId}`),
        (t) => t.includes("(pulled by listen)"),
      );
      expect(between(audit.text, '<td data-label="Destination URL"', "</td>")).toContain('<span class="muted">(pulled by listen)</span>');
      expectNoNull(audit.text);

      const bulk = await session.get("/dashboard/bulk-replay");
      expect(bulk.text).toContain(`<option value="${hook.id}">${name}</option>`);
      expectNoNull(bulk.text);

      // Editing leaves the URL out: the events change, the webhook stays a listen webhook.
      const edited = await session.post(page, { events: ["message.sent", "message.clicked"] });
      expect(edited.status).toBe(303);
      expect((await account.api("GET", `/v1/webhooks/${hook.id}`)).body).toMatchObject({
        url: null,
        mode: "listen",
        events: ["message.sent", "message.clicked"],
      });

      // Paused, it says pulls get nothing.
      expect((await session.post(`${page}/status`, { status: "paused" })).status).toBe(303);
      const paused = await session.get(`${page}?done=paused`);
      expect(paused.text).toContain("The webhook is paused: pulls get nothing until you resume it");
      expect((await session.post(`${page}/status`, { status: "enabled" })).status).toBe(303);

      for (const sub of ["delete", "rotate", "secret"]) {
        const res = await session.get(`${page}/${sub}`);
        expect([sub, res.status]).toEqual([sub, 200]);
        expect(res.text).toContain(`<code class="break">${name}</code>`);
        expectNoNull(res.text);
      }
    }
  }, 60_000);

  describe("in Chromium", () => {
    let browser: Browser;
    beforeAll(async () => {
      await mkdir(SHOTS, { recursive: true });
      browser = await launchChromium();
    }, 30_000);
    afterAll(async () => {
      await browser?.close();
    });

    test("a listen webhook's row leads to its page, which shows its mode, last pull and waiting work, and its edit saves without a URL", async () => {
      const account = await stack.newAccount();
      const hook = await listenWebhook(account, ["message.sent"]);
      {
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, baseURL: stack.baseUrl });
        const page = await context.newPage();
        const problems: string[] = [];
        page.on("pageerror", (e) => problems.push(e.message));
        await page.goto((await dashboardLink(account)).url);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.waitForURL("**/dashboard/webhooks");

        await page.getByRole("link", { name: `listen webhook ${shortOf(hook.id)}` }).click();
        await page.getByRole("heading", { name: `listen webhook ${shortOf(hook.id)}` }).waitFor();
        await page.getByText("Mode", { exact: true }).waitFor();
        await page.getByText(/pulled and not answered yet/).waitFor();
        expect(await page.getByLabel("URL", { exact: true }).count()).toBe(0);
        await page.screenshot({ path: join(SHOTS, "30-listen-webhook.png"), fullPage: true });

        await page.getByRole("group", { name: "Email events" }).getByLabel("message.opened", { exact: true }).check();
        await page.getByRole("button", { name: "Save" }).click();
        await page.getByText("Saved.").waitFor();
        expect((await account.api("GET", `/v1/webhooks/${hook.id}`)).body).toMatchObject({
          url: null,
          events: ["message.sent", "message.opened"],
        });
        expect(problems).toEqual([]);
        await context.close();
      }
    }, 60_000);
  });
});

describe("dashboard: listen webhooks, LISTEN_IDLE_HOURS=0.001 (3.6 s)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { LISTEN_IDLE_HOURS: "0.001" } });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  test('disabled_reason "idle" is said in words, on the list and on the page', async () => {
    const account = await stack.newAccount();
    const session = await signIn(stack, account);
    const hook = (await account.api("POST", "/v1/webhooks", { url: null, mode: "listen", events: ["message.sent"] })).body;
    await waitUntil(
      async () => (await account.api("GET", `/v1/webhooks/${hook.id}`)).body,
      (w) => w.status === "disabled" && w.disabled_reason === "idle",
    );
    const words = "turned off automatically: nobody pulled it for LISTEN_IDLE_HOURS";
    const shown = await session.get(`/dashboard/webhooks/${hook.id}`);
    expect(shown.text).toContain('badge-disabled">disabled');
    expect(shown.text).toContain(words);
    expect((await session.get("/dashboard/webhooks")).text).toContain(words);
    expectNoNull(shown.text);
  }, 30_000);
});
