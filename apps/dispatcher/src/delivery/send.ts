import { Readable } from "node:stream";
import type { Got } from "got";
import { deliveryHeaders, type RequestSigning } from "@mailhooks/signing";
import { BLOCKED_CODE, checkDestinationUrl, type PrivateTargets } from "@mailhooks/url-policy";
import { decodeExcerpt } from "@mailhooks/delivery-state";
import { postForAnswer } from "./http-client.js";

/**
 * One signed POST of an envelope body to a receiver (docs/receivers.md), under the webhook's
 * signature scheme (docs/receivers/standard-webhooks.md). Every outcome of the request becomes an
 * `AttemptResult` for the deliveries log.
 */

/** Short error codes of the deliveries log (docs/api.md, "Deliveries log"). */
export type AttemptError =
  | "timeout"
  | "connection_error"
  | "tls_error"
  | "dns_error"
  | "blocked_destination"
  | "insecure_url"
  // A replay whose payload was purged between the request and the attempt: nothing was sent.
  | "payload_expired";

export interface AttemptResult {
  /** true only for a 2xx received within the deadline. */
  ok: boolean;
  /** The status received (3xx included), else null. */
  responseStatus: number | null;
  /** null when a response was received. */
  error: AttemptError | null;
  /**
   * The start of the receiver's body as text (at most RESPONSE_BODY_LIMIT_BYTES of it, invalid
   * UTF-8 replaced), "" for an empty body, null when no response was received or its headers
   * were too large to reach the body.
   */
  responseBody: string | null;
  /** Wall time of the attempt, in ms. */
  durationMs: number;
}

export interface SendInput {
  url: string;
  /** The exact envelope bytes: signed and sent unchanged (a shared Buffer is never copied). */
  body: string | Buffer;
  /** The webhook's scheme and the secret(s), decrypted, that sign at this moment. */
  signing: RequestSigning;
  allowPrivateTargets: PrivateTargets;
  /** X-Service-Event-Id (and webhook-id under `standard`): the event's id, or a test request's delivery row id. */
  eventId: string;
  /** The webhook's own headers (decryptWebhookHeaders): sent, never logged. The service's own
   * headers win over one of the same name (the API refuses those names anyway). */
  headers?: Record<string, string>;
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$|HOSTNAME_MISMATCH)/;

/** Maps a got/Node error to the deliveries log's error code. */
export function classifyError(error: unknown): AttemptError {
  const code = (error as { code?: string }).code ?? "";
  const causeCode = (error as { cause?: { code?: string } }).cause?.code ?? "";
  const codes = [code, causeCode];
  if (codes.includes(BLOCKED_CODE)) return "blocked_destination";
  if (codes.includes("ETIMEDOUT") || (error as Error).name === "TimeoutError") return "timeout";
  if (codes.some((c) => c === "ENOTFOUND" || c === "EAI_AGAIN" || c === "ENODATA")) return "dns_error";
  if (codes.some((c) => TLS_CODES.test(c))) return "tls_error";
  return "connection_error";
}

/**
 * A body larger than this many bytes is written in slices of this size, each once the socket
 * has taken the previous ones (stream backpressure): TLS encrypts a write whole, so a 10 MiB
 * Buffer written at once would sit encrypted in memory, once per receiver, for as long as the
 * receiver takes to read it. Sliced, each connection holds about one slice; the plain bytes are
 * the one Buffer shared by every attempt of the event (see payload-cache.ts).
 */
export const BODY_SLICE_BYTES = 64 * 1024;

/** `body` as got sends it: as is when small, else a stream of slices of it (no copy). */
function requestBody(body: string | Buffer): { body: string | Buffer | Readable; contentLength?: string } {
  const bytes = typeof body === "string" ? Buffer.byteLength(body) : body.length;
  if (bytes <= BODY_SLICE_BYTES) return { body };
  const buffer = typeof body === "string" ? Buffer.from(body) : body;
  function* slices() {
    for (let start = 0; start < buffer.length; start += BODY_SLICE_BYTES) yield buffer.subarray(start, start + BODY_SLICE_BYTES);
  }
  return { body: Readable.from(slices(), { objectMode: false }), contentLength: String(buffer.length) };
}

/**
 * Signs and POSTs `body` to `url` with `client` (see createHttpClient and postForAnswer): the
 * signature headers of `input.signing`'s scheme over the Unix seconds at sending.
 * @throws Error only when a `standard` signing has no standard secret (the API never lets a
 *   webhook come to that); every outcome of the request itself is an AttemptResult
 */
export async function sendSigned(client: Got, input: SendInput): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  // Node does not call the agent's lookup for IP literals, so they are checked here first.
  const refused = checkDestinationUrl(input.url, { allowPrivateTargets: input.allowPrivateTargets });
  if (refused) return { ok: false, responseStatus: null, error: refused, responseBody: null, durationMs: 0 };
  const headers = deliveryHeaders({
    signing: input.signing,
    eventId: input.eventId,
    body: input.body,
    own: input.headers,
    timestamp: Math.floor(Date.now() / 1000),
  });
  try {
    const sent = requestBody(input.body);
    const answer = await postForAnswer(client, input.url, {
      body: sent.body,
      headers: { ...headers, ...(sent.contentLength ? { "content-length": sent.contentLength } : {}) },
    });
    const status = answer.statusCode;
    const responseBody = answer.body === null ? null : decodeExcerpt(answer.body, answer.truncated);
    return { ok: status >= 200 && status < 300, responseStatus: status, error: null, responseBody, durationMs: elapsed() };
  } catch (error) {
    return { ok: false, responseStatus: null, error: classifyError(error), responseBody: null, durationMs: elapsed() };
  }
}
