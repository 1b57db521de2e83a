import { randomUUID } from "node:crypto";
import getPort from "get-port";
import type { Browser, Page } from "playwright-core";
import type { Receiver } from "@mailhooks/receiver";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { launchChromium } from "../support/browser.js";
import { dashboardLink } from "./support.js";

/**
 * Every list of the dashboard fits the screen (docs/dashboard.md, "Layout"), filled with the
 * longest values it meets: long URLs, inbox ids and Message IDs, and the service's 36-character ids.
 * At 1280 px every column of every list (Webhooks, Events, Deliveries, Audit log, an event's page)
 * is on screen without scrolling: long ids are shortened, with the full value in a `title` and a
 * copy button. At 375 px nothing is wider than the screen, and URLs and addresses break only after
 * their separators (`/`, `.`, `?`, `&`, `=`, `-`, ...), never one character a line.
 */

/** Where a URL or an address may break: after one of these (presenters' `breakable`). */
const SEPARATORS = "/.?&=#@_-";

describe("dashboard layout", () => {
  let stack: Stack;
  let receiver: Receiver;
  let browser: Browser;
  let account: Account;
  let eventId: string;
  const secrets = new Map<string, string>();
  const longPath = (n: number) =>
    `/hooks/customer-${n}/email-events/production-environment/receiver?tenant=acme-corporation-${n}&region=eu-west-1`;
  const longInbox = "customer-support-escalations-team@inbox.a-rather-long-subdomain.example.net";
  const longMessageId = () => `<20261128.${randomUUID()}.${randomUUID()}@mail-relay-07.outbound.a-rather-long-domain.example.com>`;

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100", DELIVERY_TIMEOUT_MS: "2000" } });
    receiver = await stack.startReceiver({
      secretFor: (p) => secrets.get(p.split("?")[0]) ?? secrets.get(p),
      behavior: (a) => (a.path.includes("customer-2") && a.event !== "webhook.test" ? { status: 500 } : { status: 200 }),
    });
    account = await stack.newAccount();
    for (const n of [1, 2]) {
      const url = receiver.url(longPath(n));
      const hook = await account.api("POST", "/v1/webhooks", {
        url,
        events: ["message.sent", "message.delivered", "message.opened", "message.clicked", "message.received", "message.bounced"],
      });
      expect(hook.status).toBe(201);
      secrets.set(new URL(url).pathname, hook.body.secret);
      secrets.set(longPath(n), hook.body.secret);
    }
    for (const kind of ["message.sent", "message.delivered", "message.bounced"]) {
      const messageId = longMessageId();
      const data = sampleData(kind, { messageId, inboxId: longInbox });
      const created = await account.api("POST", "/v1/events", { event_type: kind, data });
      expect(created.status).toBe(201);
      eventId = created.body.event_id;
    }
    await waitUntil(
      () => account.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "failed",
    );
    // Audit entries: one replay that arrives, one whose target refuses the connection.
    const closed = await getPort({ host: "127.0.0.1" });
    const hookId = (await account.api("GET", "/v1/webhooks")).body.data[0].id;
    for (const target of [receiver.url(longPath(1)), `https://127.0.0.1:${closed}${longPath(3)}`]) {
      const replayed = await account.api("POST", `/v1/events/${eventId}/replay`, { target_url: target, webhook_id: hookId });
      expect(replayed.status).toBe(202);
    }
    await waitUntil(
      () => account.api("GET", "/v1/audit-log"),
      (r) => r.body.data.length === 2,
    );
    browser = await launchChromium();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  async function signedInPage(width: number): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 900 }, baseURL: stack.baseUrl });
    const page = await context.newPage();
    await page.goto((await dashboardLink(account)).url);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    return page;
  }

  const lists = () => [
    "/dashboard/webhooks",
    "/dashboard/events",
    "/dashboard/deliveries",
    "/dashboard/audit-log",
    `/dashboard/events/${eventId}`,
  ];

  test("at 1280 px every column of every list is on screen; long ids are shortened, whole in a title and a copy button", async () => {
    const page = await signedInPage(1280);
    for (const url of lists()) {
      await page.goto(url);
      await page.locator("table").first().waitFor();
      const fit = await page.evaluate(() => {
        const width = window.innerWidth;
        return {
          page: document.documentElement.scrollWidth - width,
          tables: [...document.querySelectorAll(".table-wrap")].map((wrap) => ({
            label: wrap.getAttribute("aria-label"),
            scrolls: wrap.scrollWidth - wrap.clientWidth,
            offScreen: [...wrap.querySelectorAll("th")]
              .filter((th) => th.getBoundingClientRect().right > Math.min(width, wrap.getBoundingClientRect().right) + 0.5)
              .map((th) => th.textContent),
          })),
        };
      });
      expect({ url, page: fit.page }).toEqual({ url, page: 0 });
      for (const table of fit.tables) expect({ url, ...table }).toEqual({ url, label: table.label, scrolls: 0, offScreen: [] });

      // Every shortened id shows less than its whole, which its title, its link's name and its copy button carry.
      const idents = await page.evaluate(() =>
        [...document.querySelectorAll("table .ident")].map((ident) => {
          const shown = ident.querySelector("a, code");
          const button = ident.querySelector<HTMLButtonElement>("button[data-copy-text]");
          return {
            shown: shown?.textContent ?? null,
            title: shown?.getAttribute("title") ?? ident.querySelector(".clipped")?.getAttribute("title") ?? null,
            copies: button?.dataset.copyText ?? null,
            visible: button ? !button.hidden : false,
          };
        }),
      );
      if (url !== "/dashboard/webhooks" && !url.startsWith(`/dashboard/events/`)) expect(idents.length).toBeGreaterThan(0);
      for (const ident of idents) {
        expect(ident.visible).toBe(true);
        expect(ident.title).toBe(ident.copies);
        if (ident.shown !== null && /^[a-z]+_[0-9a-f]{32}$/.test(ident.title ?? ""))
          expect(ident.shown).toMatch(/^[a-z]+_[0-9a-f]{6}…[0-9a-f]{4}$/);
      }
    }
    // The copy button copies the whole id.
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
    await page.goto("/dashboard/events");
    await page.getByRole("button", { name: `Copy the event id ${eventId}` }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(eventId);
    await page.context().close();
  }, 90_000);

  test("at 375 px nothing is wider than the screen and URLs break only after their separators", async () => {
    const page = await signedInPage(375);
    for (const url of lists()) {
      await page.goto(url);
      await page.locator("table").first().waitFor();
      const result = await page.evaluate((separators) => {
        const width = window.innerWidth;
        // Inside a scrolling box such as the envelope's <pre>, wider content is scrolled, not cut
        // off; a list's own box (.table-wrap) must not need to scroll, so it does not count.
        const scrolled = (element: Element) => {
          for (let e = element.parentElement; e; e = e.parentElement) {
            const overflow = getComputedStyle(e).overflowX;
            if ((overflow === "auto" || overflow === "scroll") && !e.classList.contains("table-wrap")) return true;
          }
          return false;
        };
        const tooWide = [...document.querySelectorAll("body *")]
          .filter((e) => !scrolled(e) && e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > width + 0.5)
          .map((e) => `${e.tagName.toLowerCase()}.${[...e.classList].join(".")}: ${Math.round(e.getBoundingClientRect().right)}`);
        // Each line of a URL starts after a separator: walk its characters and note where the line changes.
        const badBreaks: string[] = [];
        let urls = 0;
        for (const element of document.querySelectorAll(".url-text")) {
          urls++;
          const chars: { c: string; top: number }[] = [];
          const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let i = 0; i < node.textContent!.length; i++) {
              const range = document.createRange();
              range.setStart(node, i);
              range.setEnd(node, i + 1);
              const rect = range.getClientRects()[0];
              if (rect) chars.push({ c: node.textContent![i], top: rect.top });
            }
          }
          for (let i = 1; i < chars.length; i++)
            if (chars[i].top > chars[i - 1].top + 2 && !separators.includes(chars[i - 1].c))
              badBreaks.push(
                `${element.textContent}: after "${chars
                  .slice(Math.max(0, i - 8), i)
                  .map((x) => x.c)
                  .join("")}"`,
              );
        }
        return { page: document.documentElement.scrollWidth - width, tooWide, badBreaks, urls };
      }, SEPARATORS);
      expect({ url, page: result.page, tooWide: result.tooWide, badBreaks: result.badBreaks }).toEqual({
        url,
        page: 0,
        tooWide: [],
        badBreaks: [],
      });
      expect(result.urls).toBeGreaterThan(0);
    }
    await page.context().close();
  }, 90_000);
});
