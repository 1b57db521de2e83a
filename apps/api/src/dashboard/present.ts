import { EVENT_TYPES, OPERATIONAL_EVENT_TYPES } from "@mailhooks/events";

/**
 * Presentation helpers for the templates: times in UTC ISO 8601 with a relative hint, delivery
 * errors and API error codes in words. They format; they decide nothing.
 */

/** A time as shown: ISO 8601 UTC to the second, and a hint relative to `now`. */
export interface ShownTime {
  iso: string;
  full: string;
  relative: string;
}

function relative(ms: number): string {
  const future = ms < 0;
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 5) return "just now";
  const [value, unit] =
    s < 60
      ? [s, "s"]
      : s < 3_600
        ? [Math.round(s / 60), "min"]
        : s < 86_400
          ? [Math.round(s / 3_600), "h"]
          : [Math.round(s / 86_400), s < 2 * 86_400 ? "day" : "days"];
  return future ? `in ${value} ${unit}` : `${value} ${unit} ago`;
}

/** What a delivery `error` code means, in words (docs/api.md, "Deliveries log"). */
export const ERROR_WORDS: Record<string, string> = {
  timeout: "no answer within the deadline",
  connection_error: "could not connect",
  tls_error: "TLS failed (certificate or protocol)",
  dns_error: "host name not found",
  blocked_destination: "blocked: a private or reserved address",
  insecure_url: "refused: not an https:// URL",
  payload_expired: "not sent: the payload is past retention",
};

/** The ids the service makes: a prefix of 2 to 5 letters, `_`, 32 hex digits (`evt_…`, `wh_…`, `key_…`). */
const SERVICE_ID = /^([a-z]{2,5}_)([0-9a-f]{32})$/;

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);

/** Characters after which a URL or an address may break onto the next line. */
const BREAK_AFTER = /([/.?&=#@_-]+)/;

/**
 * The kinds a webhook subscribes to, as the forms and menus group them: the six email kinds, then
 * the operational ones (docs/api.md, "Operational events"), each group under its own label.
 */
const EVENT_KIND_GROUPS: readonly { id: string; label: string; kinds: readonly string[] }[] = [
  { id: "email", label: "Email events", kinds: EVENT_TYPES },
  { id: "operational", label: "Operational events", kinds: OPERATIONAL_EVENT_TYPES },
];

/**
 * What a log shows where an attempt's or a replay's URL is null: it was pulled by a listen
 * webhook's developer (`npm run listen`, docs/develop-locally.md), not sent to a URL.
 */
const PULLED_BY_LISTEN = "(pulled by listen)";

/** A webhook as a title, a heading or a menu names it: its URL; a listen webhook (no URL) by its mode and id. */
export function webhookName(webhook: { id: string; url: string | null }, short = (id: string) => id): string {
  return webhook.url ?? `listen webhook ${short(webhook.id)}`;
}

export function present(now: Date) {
  const shortId = (id: string) => {
    const match = SERVICE_ID.exec(id);
    return match ? `${match[1]}${match[2].slice(0, 6)}…${match[2].slice(-4)}` : id;
  };
  const breakable = (text: string) =>
    text
      .split(BREAK_AFTER)
      .map((part, i) => (i % 2 === 1 ? `${escapeHtml(part)}<wbr>` : escapeHtml(part)))
      .join("");
  return {
    eventKindGroups: EVENT_KIND_GROUPS,
    time(value: string | Date | null | undefined): ShownTime | null {
      if (value === null || value === undefined) return null;
      const date = new Date(value);
      const full = date.toISOString();
      return { iso: full.replace(/\.\d{3}Z$/, "Z"), full, relative: relative(now.getTime() - date.getTime()) };
    },
    errorWords(code: string | null): string {
      return code === null ? "" : (ERROR_WORDS[code] ?? code.replaceAll("_", " "));
    },
    /** An attempt's outcome in a few words: the status received, or why there was none. */
    outcome(status: number | null, error: string | null): string {
      if (status !== null) return status >= 200 && status < 300 ? `${status}, delivered` : `${status}, refused by the endpoint`;
      return error ? (ERROR_WORDS[error] ?? error.replaceAll("_", " ")) : "no answer";
    },
    percent(part: number, whole: number): string {
      return whole === 0 ? "no attempts" : `${Math.round((100 * part) / whole)} % (${part} of ${whole})`;
    },
    /** Length of a text in UTF-8 bytes. */
    bytes(text: string): number {
      return Buffer.byteLength(text, "utf8");
    },
    /** A payload as people read it: indented JSON. */
    pretty(value: unknown): string {
      return JSON.stringify(value, null, 2);
    },
    /**
     * An id of the service shortened for a table (`evt_01a215…0b08`: its prefix, the first 6 and
     * the last 4 hex digits); any other text as it is. The full id goes in a `title` and a copy
     * button beside it (views/partials/ident.eta).
     */
    shortId,
    /**
     * A URL or an address as escaped HTML that may break onto the next line only after `/`, `.`,
     * `?`, `&`, `=`, `#`, `@`, `_` or `-` (a `<wbr>` after each run of them), never inside a
     * word: for `<%~ %>` output, which is otherwise only used to include templates.
     */
    breakable,
    /**
     * Where an attempt or a replay went, as escaped HTML (`<%~ %>`): its URL, breakable; for null
     * (pulled by a listen webhook), PULLED_BY_LISTEN.
     */
    destination(url: string | null): string {
      return url === null ? `<span class="muted">${escapeHtml(PULLED_BY_LISTEN)}</span>` : breakable(url);
    },
    /** A webhook in a title, a heading or a menu (webhookName), a listen webhook's id shortened. */
    webhookName(webhook: { id: string; url: string | null }): string {
      return webhookName(webhook, shortId);
    },
    /** A query string of the non-empty entries of `params`. */
    query(params: Record<string, string | undefined | null>): string {
      const entries = Object.entries(params).filter((e): e is [string, string] => typeof e[1] === "string" && e[1] !== "");
      return entries.length ? `?${new URLSearchParams(entries)}` : "";
    },
  };
}

export type Presenters = ReturnType<typeof present>;
