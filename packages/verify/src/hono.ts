import { verifyEvent } from "./web.js";
import { unauthorizedBody, unauthorizedResponse } from "./errors.js";
import type { SecretInput, VerifyOptions } from "./arguments.js";
import type { HeadersLike } from "./headers.js";
import type { WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify/hono: Hono middleware on Web Crypto, so it runs wherever Hono runs
 * (Cloudflare Workers, Deno, Bun, Node). Typed structurally: hono is not a dependency.
 */

export type { WebhookErrorBody } from "./errors.js";

/** Declare these on your app to type `c.get("webhook")`: `new Hono<{ Variables: WebhookVariables }>()`. */
export type WebhookVariables = { webhook: WebhookEvent };

/** The parts of a Hono Context the middleware uses. */
export interface HonoContextLike {
  req: { raw: { headers: HeadersLike }; arrayBuffer(): Promise<ArrayBuffer> };
  set: (...args: never[]) => void;
}

/**
 * Returns a middleware that verifies the request with `secret` (one or several: any may match),
 * stores the event `{id, event, timestamp, data}` (`verifyEvent`) as `c.get("webhook")` and calls `next()`. A request that fails answers 401
 * with `{"error": {"code", "message"}}`. Hono keeps the body, so `c.req.json()` still works after it.
 */
export function verifyWebhook(secret: SecretInput, options: VerifyOptions = {}) {
  return async function verifyWebhookMiddleware<C extends HonoContextLike>(c: C, next: () => Promise<void>): Promise<Response | void> {
    const raw = await c.req.arrayBuffer();
    let webhook: WebhookEvent;
    try {
      webhook = await verifyEvent(secret, c.req.raw.headers, raw, options);
    } catch (error) {
      const answer = unauthorizedBody(error);
      if (!answer) throw error;
      return unauthorizedResponse(answer);
    }
    (c.set as unknown as (key: "webhook", value: WebhookEvent) => void)("webhook", webhook);
    await next();
  };
}
