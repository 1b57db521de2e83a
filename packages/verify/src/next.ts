import { verifyEvent } from "./web.js";
import { unauthorizedBody, unauthorizedResponse } from "./errors.js";
import type { SecretInput, VerifyOptions } from "./arguments.js";
import type { HeadersLike } from "./headers.js";
import type { WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify/next: a wrapper for Next.js route handlers (App Router), or any handler of
 * the form `(request: Request) => Response`. Web Crypto, so it runs on the Node and the Edge
 * runtimes. next is not a dependency.
 */

export type { WebhookErrorBody } from "./errors.js";

/** The parts of a Request the wrapper uses (a Request or a NextRequest). */
export interface RequestLike {
  headers: HeadersLike;
  clone(): { arrayBuffer(): Promise<ArrayBuffer> };
}

/**
 * Wraps `handler` so that it only runs for a verified request, with the event `{id, event,
 * timestamp, data}` (`verifyEvent`; `id` is X-Service-Event-Id) as its second argument (further arguments, such as Next's `{ params }`, follow). A request that fails
 * answers 401 with `{"error": {"code", "message"}}`. The body is read from a clone, so the
 * handler may still read `request` itself.
 *
 *     export const POST = withVerifiedWebhook(process.env.WEBHOOK_SECRET!, async (request, webhook) => {
 *       // ... process webhook.event / webhook.data once per webhook.id ...
 *       return new Response(null, { status: 204 });
 *     });
 */
export function withVerifiedWebhook<Req extends RequestLike = Request, Rest extends unknown[] = []>(
  secret: SecretInput,
  handler: (request: Req, webhook: WebhookEvent, ...rest: Rest) => Response | Promise<Response>,
  options: VerifyOptions = {},
): (request: Req, ...rest: Rest) => Promise<Response> {
  return async (request, ...rest) => {
    const raw = await request.clone().arrayBuffer();
    let webhook: WebhookEvent;
    try {
      webhook = await verifyEvent(secret, request.headers, raw, options);
    } catch (error) {
      const answer = unauthorizedBody(error);
      if (!answer) throw error;
      return unauthorizedResponse(answer);
    }
    return handler(request, webhook, ...rest);
  };
}
