import { z } from "zod";
import type { Keyring } from "@mailhooks/secrets";
import { hasNoNul, NO_NUL_MESSAGE } from "../http/validate.js";

/**
 * A webhook's options (docs/api.md, "Webhooks"): `rate_limit`, `inbox_ids` and `headers`, their
 * rules, and the stored form of the headers. Pure functions; no I/O.
 */

/** The highest `rate_limit`, in requests per second. */
export const MAX_RATE_LIMIT = 1000;

/** `rate_limit`: null (no limit) or 1..1000 requests per second. */
export const rateLimitSchema = z
  .number({ message: `must be null or a whole number from 1 to ${MAX_RATE_LIMIT}` })
  .int(`must be null or a whole number from 1 to ${MAX_RATE_LIMIT}`)
  .min(1, `must be null or a whole number from 1 to ${MAX_RATE_LIMIT}`)
  .max(MAX_RATE_LIMIT, `must be null or a whole number from 1 to ${MAX_RATE_LIMIT}`)
  .nullable()
  .meta({
    description: `the most requests per second sent to this webhook, over every trigger and across all dispatchers (1 to ${MAX_RATE_LIMIT}); null: no limit`,
    example: 50,
  });

/** The most inbox ids a webhook may be scoped to. */
export const MAX_INBOX_IDS = 100;

/** An inbox id as events carry it (`inbox_id`, `data.inboxId`). */
const inboxId = z
  .string({ message: "must be a string" })
  .min(1, "must not be empty")
  .max(200, "must be at most 200 characters")
  .refine(hasNoNul, NO_NUL_MESSAGE);

/** `inbox_ids`: null (every inbox of the account) or 1..100 inbox ids; repeats are ignored. */
export const inboxIdsSchema = z
  .array(inboxId, { message: "must be null or an array of inbox ids" })
  .min(1, "must list at least one inbox id (null: every inbox)")
  .max(MAX_INBOX_IDS, `must list at most ${MAX_INBOX_IDS} inbox ids`)
  .transform((ids) => [...new Set(ids)])
  .nullable()
  .meta({
    description: `the inboxes whose events this webhook receives (1 to ${MAX_INBOX_IDS} inbox ids); null: every inbox of the account. A change applies to events accepted after it.`,
    example: ["inbox_support", "inbox_sales"],
  });

/** The most extra headers a webhook may have. */
export const MAX_HEADERS = 20;
/** The longest value of an extra header, in characters. */
export const MAX_HEADER_VALUE_LENGTH = 1024;
/** The most characters of all extra headers' names and values together (8 KiB). */
export const MAX_HEADERS_TOTAL_LENGTH = 8192;
const MAX_HEADER_NAME_LENGTH = 256;

/** An HTTP token (RFC 9110 section 5.6.2): the only characters a header name may have. */
const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII, single inner spaces allowed (`Bearer abc`); no leading or trailing space, which HTTP would strip. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
/** Headers the service sets itself: a webhook may not send its own. */
const RESERVED_HEADERS = new Set(["content-type", "content-length", "host", "connection", "transfer-encoding"]);

/** Why `name` may not be an extra header's name, or null when it may. */
export function headerNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > MAX_HEADER_NAME_LENGTH || !HTTP_TOKEN.test(name)) {
    return `is not a valid header name (an HTTP token of at most ${MAX_HEADER_NAME_LENGTH} characters)`;
  }
  const lower = name.toLowerCase();
  if (RESERVED_HEADERS.has(lower)) return "is set by the service and cannot be given";
  if (lower.startsWith("x-service-")) return "is reserved: X-Service-* headers are set by the service";
  return null;
}

/**
 * `headers`: up to 20 extra request headers, name to value. Problems name the header (never its
 * value: values are secrets, and error messages are echoed and logged).
 */
export const webhookHeadersSchema = z
  .preprocess(
    // JSON.parse makes `__proto__` an own key, which a record would drop without a word: it is
    // renamed to a name that fails the token rule, so that it is refused instead.
    (value) =>
      value !== null && typeof value === "object" && Object.hasOwn(value, "__proto__")
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k === "__proto__" ? "__proto__ " : k, v]))
        : value,
    z
      .record(z.string(), z.string({ message: "must be a string" }), { message: "must be an object of header names to values" })
      .superRefine((headers, ctx) => {
        const names = Object.keys(headers);
        if (names.length > MAX_HEADERS) ctx.addIssue({ code: "custom", message: `must have at most ${MAX_HEADERS} headers` });
        const seen = new Set<string>();
        let total = 0;
        for (const name of names) {
          const value = headers[name];
          total += name.length + value.length;
          const nameProblem = headerNameProblem(name);
          if (nameProblem) ctx.addIssue({ code: "custom", path: [name], message: `header name ${nameProblem}` });
          else if (seen.has(name.toLowerCase()))
            ctx.addIssue({ code: "custom", path: [name], message: "header name is given twice (names are case-insensitive)" });
          seen.add(name.toLowerCase());
          if (value.length > MAX_HEADER_VALUE_LENGTH)
            ctx.addIssue({ code: "custom", path: [name], message: `header value must be at most ${MAX_HEADER_VALUE_LENGTH} characters` });
          else if (!HEADER_VALUE.test(value)) {
            ctx.addIssue({
              code: "custom",
              path: [name],
              message: "header value must be visible ASCII characters (inner spaces allowed), not empty",
            });
          }
        }
        if (total > MAX_HEADERS_TOTAL_LENGTH)
          ctx.addIssue({ code: "custom", message: `names and values must be at most ${MAX_HEADERS_TOTAL_LENGTH} characters in all` });
      }),
  )
  .meta({
    description: `extra request headers sent with every delivery to this webhook, name to value (at most ${MAX_HEADERS}; names are HTTP tokens, and Content-Type, Content-Length, Host, Connection, Transfer-Encoding and X-Service-* are refused; values at most ${MAX_HEADER_VALUE_LENGTH} visible ASCII characters, ${MAX_HEADERS_TOTAL_LENGTH} in all). Values are secrets: stored encrypted and never answered. \`{}\`: none.`,
    example: { Authorization: "Bearer gw_3f9c1a7d5e" },
  });
export type WebhookHeaders = z.infer<typeof webhookHeadersSchema>;

/** What answers show of a header's value. */
export const MASKED_HEADER_VALUE = "***" as const;

/**
 * The stored form of a set of headers (agreed with the dispatcher, which reads it):
 * `keyring.encrypt(JSON.stringify({name: value, ...}))`, or null for none.
 */
export function encryptHeaders(keyring: Keyring, headers: Record<string, string>): string | null {
  return Object.keys(headers).length === 0 ? null : keyring.encrypt(JSON.stringify(headers));
}

/** The headers of a stored form. @throws SecretDecryptionError (no key opens it) */
export function decryptHeaders(keyring: Keyring, stored: string | null): Record<string, string> {
  if (stored === null) return {};
  const parsed = JSON.parse(keyring.decrypt(stored)) as Record<string, string>;
  return Object.assign(Object.create(null) as Record<string, string>, parsed);
}

/** Header names with their values masked (`{"Authorization": "***"}`): what answers show. */
export function maskedHeaders(keyring: Keyring, stored: string | null): Record<string, typeof MASKED_HEADER_VALUE> {
  return Object.fromEntries(Object.keys(decryptHeaders(keyring, stored)).map((name) => [name, MASKED_HEADER_VALUE]));
}

/**
 * Characters that would make a URL look like another in the dashboard: C0/C1 controls, format
 * characters (bidi overrides and isolates, zero-width characters, soft hyphen, tags), line and
 * paragraph separators, spaces other than U+0020, fillers and blanks that render as nothing,
 * variation selectors, surrogates, private-use and unassigned code points.
 */
const INVISIBLE =
  // eslint-disable-next-line no-misleading-character-class -- each combining mark and variation selector is listed to be refused on its own
  /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0\u2800\ufe00-\ufe0f\u{e0100}-\u{e01ef}]/u;

/** True when `text` has no character of INVISIBLE. */
export const isVisibleText = (text: string) => !INVISIBLE.test(text);

/**
 * A set of headers after an edit in the dashboard: `current` without the names in `remove`,
 * then `add` (a name given again, in any case, replaces the value it had).
 */
export function editedHeaders(
  current: Record<string, string>,
  remove: readonly string[],
  add: Record<string, string>,
): Record<string, string> {
  const dropped = new Set([...remove, ...Object.keys(add)].map((name) => name.toLowerCase()));
  const kept = Object.entries(current).filter(([name]) => !dropped.has(name.toLowerCase()));
  return Object.fromEntries([...kept, ...Object.entries(add)]);
}
