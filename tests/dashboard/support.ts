import { createHash } from "node:crypto";
import request from "supertest";
import type { Account, Stack } from "../support/stack.js";
import { waitUntil } from "../support/wait.js";

/**
 * Dashboard test helpers: sign in through a real one-time link (POST /v1/dashboard-links, then
 * the sign-in page's button), then call pages with the session cookie and the CSRF token that
 * the pages themselves carry.
 */

export interface Session {
  cookie: string;
  csrf: string;
  get: (path: string, headers?: Record<string, string>) => Promise<request.Response>;
  /** POSTs a form with this session's CSRF token unless `form._csrf` is given (null: none). */
  post: (path: string, form?: Record<string, string | string[] | null>, headers?: Record<string, string>) => Promise<request.Response>;
}

/** A one-time sign-in link made by `account`'s key. */
export async function dashboardLink(account: Pick<Account, "api">): Promise<{ url: string; expires_at: string }> {
  const res = await account.api("POST", "/v1/dashboard-links");
  if (res.status !== 201) throw new Error(`POST /v1/dashboard-links answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The path of a link URL (the tests call the stack's own base URL). */
export const pathOf = (url: string) => new URL(url).pathname;

export const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest("hex");

/** The value of the session cookie set by a response, or null. */
export function sessionCookieOf(res: request.Response): string | null {
  const cookies = ([] as string[]).concat(res.headers["set-cookie"] ?? []);
  const line = cookies.find((c) => c.startsWith("mailhooks_dashboard="));
  const value = line?.split(";")[0].slice("mailhooks_dashboard=".length);
  return value ? value : null;
}

export const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";

/** Signs in with a fresh link of `account` and returns the session. */
export async function signIn(stack: Stack, account: Pick<Account, "api"> = stack): Promise<Session> {
  const link = await dashboardLink(account);
  return signInWith(stack, link.url);
}

export async function signInWith(stack: Stack, linkUrl: string): Promise<Session> {
  const redeemed = await request(stack.baseUrl).post(pathOf(linkUrl));
  if (redeemed.status !== 303) throw new Error(`sign-in answered ${redeemed.status}: ${redeemed.text.slice(0, 300)}`);
  const cookie = sessionCookieOf(redeemed);
  if (!cookie) throw new Error("sign-in set no session cookie");
  return sessionFor(stack, cookie);
}

export async function sessionFor(stack: Stack, cookie: string): Promise<Session> {
  const session: Session = {
    cookie,
    csrf: "",
    get: (path, headers = {}) =>
      request(stack.baseUrl)
        .get(path)
        .set({ cookie: `mailhooks_dashboard=${cookie}`, ...headers }),
    post: (path, form = {}, headers = {}) => {
      const body = new URLSearchParams();
      const fields = { _csrf: session.csrf, ...form };
      for (const [name, value] of Object.entries(fields)) {
        if (value === null) continue;
        for (const v of Array.isArray(value) ? value : [value]) body.append(name, v);
      }
      return request(stack.baseUrl)
        .post(path)
        .set({ cookie: `mailhooks_dashboard=${cookie}`, "content-type": "application/x-www-form-urlencoded", ...headers })
        .send(body.toString());
    },
  };
  const home = await session.get("/dashboard/webhooks");
  if (home.status !== 200) throw new Error(`the webhooks page answered ${home.status}`);
  session.csrf = csrfOf(home.text);
  return session;
}

/**
 * Checks that a page runs no inline code: every script is a same-origin file, and no element
 * carries an event-handler attribute, a style attribute or a javascript: URL.
 */
export function expectNoInlineCode(html: string): void {
  for (const tag of html.match(/<script\b[^>]*>/gi) ?? [])
    expect(tag).toMatch(/^<script src="\/dashboard\/assets\/[a-z.-]+\.js"( defer)?>$/);
  expect(html).not.toMatch(/<script\b[^>]*>[^<]+<\/script>/i);
  // Only real tags are looked at: escaped text (`&lt;img onerror=...&gt;`) is inert.
  for (const tag of html.match(/<[a-z][^>]*>/gi) ?? []) {
    const names = tag.replace(/"[^"]*"|'[^']*'/g, '""'); // attribute names, not values
    expect(names).not.toMatch(/\son[a-z]+\s*=/i);
    expect(names).not.toMatch(/\sstyle\s*=/i);
    expect(tag).not.toMatch(/(href|src|action|formaction)\s*=\s*["']?\s*javascript:/i);
  }
}

/** Waits until `read` answers a page whose text satisfies `accept`. */
export async function waitForPage(
  read: () => Promise<request.Response>,
  accept: (text: string) => boolean,
  timeoutMs = 20_000,
): Promise<request.Response> {
  return waitUntil(read, (res) => accept(res.text), timeoutMs, 100);
}
