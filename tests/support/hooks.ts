import { createServer } from "node:net";
import type { Arrival, Receiver, Reply } from "@mailhooks/receiver";
import { callApi, type ApiAnswer, type CallOptions } from "./api-call.js";
import type { Account, Stack } from "./stack.js";

/** Anything with an `api` bound to a key: the stack itself or one of its accounts. */
export type ApiClient = Pick<Account, "api">;

/**
 * Helpers shared by the e2e tests: receivers whose secrets are learnt per path once a webhook
 * is created, webhook creation, envelope parsing, and the error shape of docs/api.md, "Errors".
 */

export interface HookReceiver {
  receiver: Receiver;
  /** Path -> secret the receiver verifies with (set by createHook). */
  secrets: Map<string, string>;
  url: (path: string) => string;
}

/**
 * A reference receiver that knows a secret per path. `behavior` is called for verified
 * requests; `nth` counts only this path's email events (test events excluded), from 1.
 */
export async function startHookReceiver(
  stack: Stack,
  behavior?: (arrival: Arrival, nth: number) => Reply,
  options: { secretFor?: (path: string) => string | string[] | undefined } = {},
): Promise<HookReceiver> {
  const secrets = new Map<string, string>();
  const counts = new Map<string, number>();
  const receiver = await stack.startReceiver({
    secretFor: options.secretFor ?? ((path) => secrets.get(path)),
    behavior: (arrival) => {
      if (!behavior) return {};
      if (arrival.event === "webhook.test") return behavior(arrival, 0);
      const nth = (counts.get(arrival.path) ?? 0) + 1;
      counts.set(arrival.path, nth);
      return behavior(arrival, nth);
    },
  });
  return { receiver, secrets, url: (path) => receiver.url(path) };
}

export interface CreatedHook {
  id: string;
  url: string;
  secret: string;
  body: any;
}

/** Registers a webhook at `path` of `hr` and teaches the receiver its secret. */
export async function createHook(client: ApiClient, hr: HookReceiver, path: string, events: string[]): Promise<CreatedHook> {
  const url = hr.url(path);
  const created = await client.api("POST", "/v1/webhooks", { url, events });
  if (created.status !== 201) throw new Error(`webhook creation answered ${created.status}: ${JSON.stringify(created.body)}`);
  hr.secrets.set(path, created.body.secret);
  return { id: created.body.id, url, secret: created.body.secret, body: created.body };
}

/**
 * The envelope `event` of an arrival, parsed from the raw body (also for unverified arrivals:
 * the test event may reach the receiver before the test learnt the webhook's secret).
 */
export function eventOf(arrival: Arrival): string | undefined {
  try {
    return (JSON.parse(arrival.body) as { event?: string }).event;
  } catch {
    return undefined;
  }
}

export function envelopeOf(arrival: Arrival): { event: string; timestamp: number; data: any } {
  return JSON.parse(arrival.body);
}

/** Arrivals at `path`, optionally of one envelope event. */
export function at(arrivals: Arrival[], path: string, event?: string): Arrival[] {
  return arrivals.filter((a) => a.path === path && (event === undefined || eventOf(a) === event));
}

/** Arrivals at `path` carrying an email event (the test event excluded). */
export function emailArrivals(arrivals: Arrival[], path: string): Arrival[] {
  return arrivals.filter((a) => a.path === path && eventOf(a) !== "webhook.test");
}

/** Every deliveries-log row matching `query` (all pages), oldest first. */
export async function deliveryRows(client: ApiClient, query: Record<string, string>): Promise<any[]> {
  const rows: any[] = [];
  let cursor: string | null = null;
  for (;;) {
    const params = new URLSearchParams({ ...query, limit: "100", ...(cursor ? { cursor } : {}) });
    const res = await client.api("GET", `/v1/deliveries?${params}`);
    if (res.status !== 200) throw new Error(`GET /v1/deliveries answered ${res.status}: ${JSON.stringify(res.body)}`);
    rows.push(...res.body.data);
    cursor = res.body.next_cursor;
    if (!cursor) break;
  }
  return rows.reverse();
}

/** Calls the API of `stack` with another key (e.g. from stack.newAccountKey()), or none; checked like stack.api. */
export function apiAs(
  stack: Stack,
  key: string | null,
  method: string,
  urlPath: string,
  body?: unknown,
  headers: Record<string, string> = {},
  options: CallOptions = {},
): Promise<ApiAnswer> {
  return callApi(stack.baseUrl, key, method, urlPath, body, headers, options);
}

/**
 * Asserts the error shape of docs/api.md, "Errors": exactly `{"error": {"code", "message", "details"?}}`,
 * with `details` items `{path, message}` when present.
 */
export function expectError(res: { status: number; body: any }, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(Object.keys(res.body)).toEqual(["error"]);
  const error = res.body.error;
  expect(typeof error.message).toBe("string");
  expect(error.message.length).toBeGreaterThan(0);
  const keys = Object.keys(error).sort();
  expect(keys.filter((k) => k !== "details")).toEqual(["code", "message"]);
  if ("details" in error) {
    expect(Array.isArray(error.details)).toBe(true);
    for (const d of error.details) {
      expect(Object.keys(d).sort()).toEqual(["message", "path"]);
      expect(typeof d.path).toBe("string");
      expect(typeof d.message).toBe("string");
    }
  }
}

/** A 422 whose details name `path`. */
export function expectValidation(res: { status: number; body: any }, path: string): void {
  expectError(res, 422, "validation_error");
  expect(Array.isArray(res.body.error.details)).toBe(true);
  expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
}

/** A localhost TCP port nobody listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
