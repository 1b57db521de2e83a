import type { IncomingMessage, ServerResponse } from "node:http";
import { verify, isWebhookVerificationError, SIGNATURE_HEADER, TIMESTAMP_HEADER, type WebhookEnvelope } from "@mailhooks/verify";
import { listenHttps } from "./https-server.js";

/** docs/receivers.md: the event's id on every request (what `dedupeBy: "event-id"` keys on). */
export const EVENT_ID_HEADER = "X-Service-Event-Id";

/**
 * The reference receiver (README.md, "The two commands"): an HTTPS endpoint that verifies every
 * signature with @mailhooks/verify (constant time, on the raw bytes) before looking at the
 * body, answers 401 on a mismatch, 400 to a signed body that is not an envelope, and
 * de-duplicates by `event` + `data.messageId` (retries and replays deliver the same event again).
 * Used by the demo and the tests; `behavior` lets them make it fail on purpose.
 */

export interface Arrival {
  /** Request path, e.g. `/hooks/a`. */
  path: string;
  /** Raw body as received. */
  body: string;
  timestamp: string | undefined;
  signature: string | undefined;
  verified: boolean;
  /** Envelope `event`, when the body parsed. */
  event?: string;
  messageId?: string;
  /** True when this messageId was already processed at this path. */
  duplicate: boolean;
  /** Status answered. */
  status: number;
  /** Date.now() at arrival, in ms. */
  receivedAt: number;
  /** The request's headers, as Node parsed them (names lower-cased). */
  headers: import("node:http").IncomingHttpHeaders;
  /** X-Service-Event-Id (docs/receivers.md), when sent. */
  eventId?: string;
}

export interface Reply {
  status?: number;
  /** Wait this many ms before answering (to provoke a time-out). */
  delayMs?: number;
  headers?: Record<string, string>;
  /** Answer only once this settles (after `delayMs`), e.g. once a test has changed something. */
  hold?: Promise<unknown>;
}

export interface ReceiverOptions {
  cert: string;
  key: string;
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** The secret expected at a path (may be a promise, e.g. of a webhook still being created);
   * undefined answers 404. */
  secretFor: (path: string) => string | string[] | undefined | Promise<string | string[] | undefined>;
  /** Decides the answer to a verified request (default 200). Unverified requests get 401. */
  behavior?: (arrival: Arrival, nthAtPath: number) => Reply;
  /**
   * What makes an arrival a duplicate: `message-id` (default: the same envelope `event` about the
   * same `data.messageId` again at a path) or `event-id` (the same X-Service-Event-Id again at a
   * path, as docs/receivers.md advises receivers: two opens of one message are two events).
   */
  dedupeBy?: "message-id" | "event-id";
}

export interface Receiver {
  url: (path: string) => string;
  port: number;
  arrivals: Arrival[];
  /** Resolves once `predicate(arrivals)` holds; rejects after `timeoutMs`. */
  waitFor: (predicate: (arrivals: Arrival[]) => boolean, timeoutMs?: number) => Promise<Arrival[]>;
  close: () => Promise<void>;
}

function readBody(req: import("node:http").IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/**
 * Verifies with every check of the library but the timestamp window: the tests replay requests
 * with fixed timestamps, and what the demo reports is whether every signature verified.
 * `verified` is true when the signature matched (also for a body that is then no envelope).
 */
function check(
  secret: string | string[],
  headers: import("node:http").IncomingHttpHeaders,
  raw: Buffer,
): { verified: boolean; envelope?: WebhookEnvelope } {
  try {
    return { verified: true, envelope: verify(secret, headers, raw, { toleranceSeconds: Infinity }) };
  } catch (error) {
    if (!isWebhookVerificationError(error)) throw error;
    return { verified: error.code === "invalid_payload" };
  }
}

export async function startReceiver(options: ReceiverOptions): Promise<Receiver> {
  const arrivals: Arrival[] = [];
  const seen = new Set<string>();
  const countByPath = new Map<string, number>();
  const waiters = new Set<() => void>();

  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? "/").split("?")[0];
    const raw = await readBody(req);
    const secret = await options.secretFor(path);
    const timestamp = req.headers[TIMESTAMP_HEADER.toLowerCase()] as string | undefined;
    const signature = req.headers[SIGNATURE_HEADER.toLowerCase()] as string | undefined;
    // Verify before processing: only a verified body is parsed (by verify itself).
    const { verified, envelope } = secret !== undefined && req.method === "POST" ? check(secret, req.headers, raw) : { verified: false };
    const eventIdHeader = req.headers[EVENT_ID_HEADER.toLowerCase()];
    const eventId = typeof eventIdHeader === "string" ? eventIdHeader : undefined;
    const arrival: Arrival = {
      path,
      body: raw.toString("utf8"),
      timestamp,
      signature,
      verified,
      duplicate: false,
      status: 200,
      receivedAt: Date.now(),
      headers: req.headers,
      eventId,
    };
    let dedupKey: string | undefined;
    if (envelope && options.dedupeBy === "event-id") {
      arrival.event = envelope.event;
      const messageId = envelope.data.messageId;
      arrival.messageId = typeof messageId === "string" ? messageId : undefined;
      if (eventId) {
        dedupKey = `${path} ${eventId}`;
        arrival.duplicate = seen.has(dedupKey);
      }
    } else if (envelope) {
      arrival.event = envelope.event;
      const messageId = envelope.data.messageId;
      arrival.messageId = typeof messageId === "string" ? messageId : undefined;
      if (arrival.messageId) {
        // One email produces several events (sent, delivered, opened...) with one messageId:
        // a duplicate is the same event kind about the same message again.
        dedupKey = `${path} ${arrival.event} ${arrival.messageId}`;
        arrival.duplicate = seen.has(dedupKey);
      }
    } else if (verified) {
      arrival.status = 400;
    } else {
      arrival.status = secret === undefined ? 404 : 401;
    }
    const nth = (countByPath.get(path) ?? 0) + 1;
    countByPath.set(path, nth);
    const reply: Reply = verified && arrival.status === 200 ? (options.behavior?.(arrival, nth) ?? {}) : { status: arrival.status };
    arrival.status = reply.status ?? 200;
    // Only an accepted delivery is processed: the retry that follows a failure answer is no duplicate.
    if (dedupKey && arrival.status >= 200 && arrival.status < 300) seen.add(dedupKey);
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (reply.hold) await reply.hold.catch(() => undefined);
    arrivals.push(arrival);
    for (const wake of waiters) wake();
    res.writeHead(arrival.status, { "content-type": "application/json", ...reply.headers });
    res.end(JSON.stringify({ received: verified }));
  };
  const listener = await listenHttps(options, (req, res) => void answer(req, res), {
    port: options.port,
    host: options.host,
    keepAliveTimeoutMs: 60_000,
  });

  return {
    port: listener.port,
    arrivals,
    url: listener.url,
    waitFor: (predicate, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(arrivals)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(arrivals);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver: condition not met within ${timeoutMs} ms (${arrivals.length} arrivals)`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    close: listener.close,
  };
}
