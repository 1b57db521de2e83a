import sql from "sql-template-tag";
import type { RequestSigning } from "@mailhooks/signing";
import { run, type Queryable } from "./db.js";

/**
 * What the dispatcher's reads and writes of attempts share (destination-attempts.ts,
 * replay-attempts.ts, test-attempts.ts): a webhook's stored secrets and headers, the payload
 * join, and the shape of an attempt's outcome. Every row an attempt writes is stamped by
 * PostgreSQL (`now()` in the statement that writes it, docs/api.md, "Deliveries log"), never by a
 * dispatcher's clock nor at the attempt's start, so that the logs have one clock.
 */

/**
 * A webhook's stored (encrypted) secrets: `secret` signs from `activatesAt` on (always, when
 * null); before that, `previous` signs (docs/receivers.md, "Secret rotation").
 */
export interface StoredSecrets {
  secret: string;
  previous: string | null;
  activatesAt: Date | null;
}

/** The stored secret that signs at `at` under the `service` scheme (one signature per request). */
export function signingSecretAt(secrets: StoredSecrets, at: Date): string {
  return secrets.activatesAt && secrets.previous !== null && at < secrets.activatesAt ? secrets.previous : secrets.secret;
}

/**
 * The stored secrets that sign at `at` under the `standard` scheme (docs/receivers/standard-webhooks.md):
 * during a rotation's grace (before `activatesAt`) the previous one and the new one, in that
 * order, so that a receiver holding either verifies; otherwise the one secret.
 */
export function signingSecretsAt(secrets: StoredSecrets, at: Date): string[] {
  return secrets.activatesAt && secrets.previous !== null && at < secrets.activatesAt
    ? [secrets.previous, secrets.secret]
    : [secrets.secret];
}

/**
 * How a request of `webhook` made at `at` is signed (docs/receivers/standard-webhooks.md), its
 * secrets opened with `decrypt` (the keyring of SECRET_ENCRYPTION_KEYS): under `service` the one
 * secret that signs then (signingSecretAt), under `standard` every one that does
 * (signingSecretsAt: both during a rotation's grace).
 * @throws what `decrypt` throws (SecretDecryptionError when no configured key opens a secret)
 */
export function signingAt(
  decrypt: (stored: string) => string,
  webhook: { secrets: StoredSecrets; signatureScheme: "service" | "standard" },
  at: Date,
): RequestSigning {
  if (webhook.signatureScheme === "standard") return { scheme: "standard", secrets: signingSecretsAt(webhook.secrets, at).map(decrypt) };
  return { scheme: "service", secret: decrypt(signingSecretAt(webhook.secrets, at)) };
}

/**
 * Payloads up to this many bytes come with an attempt's other data, in its (batched) read; a
 * larger one is read on its own (loadPayload), once per event and within the dispatcher's byte
 * budget, so that a batch of attempts never holds more than this per attempt (issue 17 item 2).
 */
export const INLINE_PAYLOAD_BYTES = 64 * 1024;

/**
 * The event's payload, unless it is past the retention horizon. Pruning to the event's day
 * partition happens at run time, but the planner still looks at every partition (90 days of
 * retention and two weeks ahead: about 105), which cost some 10 ms per statement on a grown
 * database where execution takes 1 ms; statements with this join are therefore prepared under a
 * name (see `run`), so their plan is made once per connection.
 */
export const PAYLOAD_JOIN = sql`LEFT JOIN event_payloads p ON p.event_id = e.id AND p.created_at = e.created_at
                           AND e.created_at >= (SELECT payloads_purged_before FROM retention_state WHERE id = 1)`;

/**
 * The payload's size in bytes (null once purged; the size of a TOASTed text is read without
 * reading the text) and the payload itself when it is at most INLINE_PAYLOAD_BYTES.
 */
export const PAYLOAD_COLUMNS = sql`octet_length(p.payload) AS "payloadBytes",
             CASE WHEN octet_length(p.payload) <= ${INLINE_PAYLOAD_BYTES} THEN p.payload END AS payload`;

/** What an attempt of any kind of work reads of its webhook. */
export interface AttemptWebhook {
  secrets: StoredSecrets;
  /** How its requests are signed (docs/receivers/standard-webhooks.md), read at attempt time. */
  signatureScheme: "service" | "standard";
  /** The webhook's extra request headers, encrypted (docs/api.md, "Webhooks"); null: none. */
  storedHeaders: string | null;
  /** The webhook is enabled and not deleted, read at attempt time. */
  webhookEnabled: boolean;
  /** The webhook is paused (and not deleted): nothing is sent to its URL until it is enabled again. */
  webhookPaused: boolean;
}

/**
 * AttemptWebhook's columns (`w` is the webhooks row). `secrets` comes back as JSON, its times
 * as strings: turn it into StoredSecrets with secretsOf.
 */
export const ATTEMPT_WEBHOOK_COLUMNS = sql`json_build_object('secret', w.secret, 'previous', w.previous_secret, 'activatesAt', w.secret_activates_at) AS secrets,
             w.signature_scheme AS "signatureScheme", w.headers AS "storedHeaders", (w.status = 'enabled' AND w.deleted_at IS NULL) AS "webhookEnabled",
             (w.status = 'paused' AND w.deleted_at IS NULL) AS "webhookPaused"`;

/** JSON columns come back with times as strings. */
export function secretsOf(raw: { secret: string; previous: string | null; activatesAt: string | null }): StoredSecrets {
  return { secret: raw.secret, previous: raw.previous, activatesAt: raw.activatesAt ? new Date(raw.activatesAt) : null };
}

/**
 * What an attempt needs of its event's payload: its size (null once purged) and, when it is at
 * most INLINE_PAYLOAD_BYTES, the bytes themselves (else null: read them with loadPayload).
 */
export interface PayloadRef {
  eventId: string;
  eventCreatedAt: Date;
  payloadBytes: number | null;
  payload: string | null;
}

/** How many characters of a large payload one read takes (see loadPayload). */
export const PAYLOAD_READ_CHARS = 1024 * 1024;

/**
 * The envelope bytes of one event (a large one, see INLINE_PAYLOAD_BYTES), or null once purged.
 * Read PAYLOAD_READ_CHARS characters at a time and copied into one Buffer as they come, so that
 * reading a 10 MiB payload never holds it twice more (as one driver buffer and one string) on
 * top of the Buffer: only one slice of each.
 */
export async function loadPayload(db: Queryable, eventId: string): Promise<Buffer | null> {
  const slice = (from: number) =>
    run<{ chars: number | null; bytes: number | null; part: string | null }>(
      db,
      sql`SELECT char_length(p.payload) AS chars, octet_length(p.payload) AS bytes, substr(p.payload, ${from}::int, ${PAYLOAD_READ_CHARS}::int) AS part
            FROM events e ${PAYLOAD_JOIN} WHERE e.id = ${eventId}`,
      // Prepared: see PAYLOAD_JOIN.
      "delivery_state_load_payload_slice",
    );
  const first = (await slice(1)).rows[0];
  if (!first || first.part === null || first.chars === null || first.bytes === null) return null;
  const out = Buffer.allocUnsafe(first.bytes);
  let written = out.write(first.part, 0, "utf8");
  for (let from = 1 + PAYLOAD_READ_CHARS; from <= first.chars; from += PAYLOAD_READ_CHARS) {
    const part = (await slice(from)).rows[0]?.part;
    // Purged between two reads.
    if (part === null || part === undefined) return null;
    written += out.write(part, written, "utf8");
  }
  return written === out.length ? out : null;
}

/** How much of a receiver's body is kept for the deliveries log (docs/api.md, "Deliveries log"), in bytes. */
export const RESPONSE_BODY_LIMIT_BYTES = 4096;

/**
 * A receiver's body excerpt as text: UTF-8 with every invalid sequence replaced by U+FFFD. A
 * multi-byte character cut by the byte limit (`truncated`) is dropped rather than replaced (it was
 * not invalid), and NUL becomes U+FFFD too, since PostgreSQL text cannot hold it.
 */
export function decodeExcerpt(bytes: Buffer, truncated: boolean): string {
  // `stream: true` holds back (here: drops) an incomplete sequence at the very end.
  const text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(bytes, { stream: truncated });
  return text.replaceAll("\u0000", "\uFFFD");
}

/** What an attempt produced (the dispatcher's AttemptResult has this shape). */
export interface AttemptRecord {
  ok: boolean;
  responseStatus: number | null;
  error: string | null;
  responseBody?: string | null;
  durationMs: number;
}

/**
 * The `error` of work the service itself could not carry out (docs/api.md, "Deliveries log"): a job that
 * failed for a reason that is neither a delivery failure nor an outage, or that kept killing the
 * dispatchers that ran it.
 */
export const INTERNAL_ERROR = "internal_error";
