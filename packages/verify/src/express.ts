import { verifyEvent } from "./index.js";
import { unauthorizedBody } from "./errors.js";
import type { SecretInput, VerifyOptions } from "./arguments.js";
import type { WebhookEvent } from "./events.js";

/**
 * @mailhooks/verify/express: middleware for Express 4 and 5 (and Connect-style servers).
 * Typed structurally, so express is not a dependency of this package.
 */

export type { WebhookErrorBody } from "./errors.js";

/** The parts of an Express request the middleware uses; `webhook` is set once verified. */
export interface ExpressRequestLike extends AsyncIterable<unknown> {
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  readableEnded?: boolean;
  webhook?: WebhookEvent;
}

export interface ExpressResponseLike {
  status(code: number): ExpressResponseLike;
  json(body: unknown): unknown;
}

/**
 * A request that passed the middleware: `req.webhook` is the verified event `{id, event,
 * timestamp, data}` (`id`: X-Service-Event-Id), typed by `event`.
 */
export type VerifiedRequest<Req = ExpressRequestLike> = Req & { webhook: WebhookEvent };

export interface ExpressVerifyOptions extends VerifyOptions {
  /** When the middleware reads the body itself: the most bytes accepted (default 25 MiB), else 413. */
  maxBodyBytes?: number;
}

/** Raw inbound messages may be 10 MiB; their envelope (text, headers, JSON escapes) stays well below this. */
const DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024;

class BodyTooLarge extends Error {}

async function readRaw(req: ExpressRequestLike, limit: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : (chunk as Uint8Array);
    size += bytes.length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(bytes);
  }
  return Buffer.concat(chunks);
}

/**
 * Returns a middleware that verifies the request with `secret` (one or several: any may match)
 * and puts the event on `req.webhook` (`verifyEvent`'s `{id, event, timestamp, data}`), then
 * calls `next()`. A request that fails answers
 * 401 with `{"error": {"code", "message"}}` and goes no further.
 *
 * The body must be raw: mount it after `express.raw({ type: "application/json" })` or before
 * any body parser (it then reads the body itself, up to `maxBodyBytes`). After
 * `express.json()` it passes a TypeError to `next`, because the signed bytes are gone.
 */
export function verifyWebhook(secret: SecretInput, options: ExpressVerifyOptions = {}) {
  const { maxBodyBytes = DEFAULT_MAX_BODY_BYTES, ...verifyOptions } = options;
  return function verifyWebhookMiddleware(req: ExpressRequestLike, res: ExpressResponseLike, next: (error?: unknown) => void): void {
    // Express 5 leaves `body` undefined when no parser ran; the stream is then still unread.
    const unread = req.body === undefined && !req.readableEnded;
    const body = unread ? readRaw(req, maxBodyBytes) : Promise.resolve(req.body);
    body.then(
      (raw) => {
        try {
          req.webhook = verifyEvent(secret, req.headers, raw as Buffer, verifyOptions);
        } catch (error) {
          const answer = unauthorizedBody(error);
          if (!answer) return next(error);
          res.status(401).json(answer);
          return;
        }
        next();
      },
      (error: unknown) => {
        if (error instanceof BodyTooLarge) {
          res.status(413).json({ error: { code: "payload_too_large", message: `body over ${maxBodyBytes} bytes` } });
        } else {
          next(error);
        }
      },
    );
  };
}
