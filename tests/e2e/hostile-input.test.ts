import http from "node:http";
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { EVENT_TYPES } from "@mailhooks/events";
import { callApi } from "../support/api-call.js";
import { sampleData, startStack, type Account, type Stack } from "../support/stack.js";

/**
 * Hostile input (issue 4, item 10): a fast-check property throws generated methods, paths,
 * path ids, query strings, headers and bodies at every route of the API. Whatever comes in, the
 * answer is never a 5xx (nor a dropped connection), and every 4xx is in the error shape with a
 * code of docs/api.md, "Errors"; 2xx answers are fine (random input is sometimes valid).
 * Afterwards nothing was stored but what 2xx answers created, and the process still answers.
 *
 * Requests go through node:http rather than fetch, so that paths are sent as generated
 * (`../`, `%00`, malformed percent-encoding) instead of being normalized by the client.
 */

/** docs/api.md, "Errors": code -> status. */
const CONTRACT_CODES: Record<string, number> = {
  invalid_json: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  payload_expired: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  rate_limited: 429,
  unavailable: 503,
};

interface HostileRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Send the body with Transfer-Encoding: chunked instead of Content-Length. */
  chunked: boolean;
  /** Which account's key is in the Authorization header (if any). */
  as: "main" | "other" | "none";
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

function send(baseUrl: string, request: HostileRequest): Promise<Answer> {
  const base = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: base.hostname,
        port: base.port,
        method: request.method,
        path: request.path,
        headers: request.headers,
        agent: false,
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within 10 s to ${request.method} ${request.path.slice(0, 200)}`)));
    // The server may answer (e.g. 401) before reading a body: a write error after the answer is no failure.
    req.on("error", (error) => reject(error));
    if (request.body && request.chunked) {
      const half = Math.floor(request.body.length / 2);
      req.write(request.body.subarray(0, half));
      req.end(request.body.subarray(half));
    } else {
      req.end(request.body);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Percent-encodes every byte of the UTF-8 form except unreserved characters (lone surrogates too). */
const pctEncode = (value: string) =>
  [...Buffer.from(value, "utf8")]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`,
    )
    .join("");

/** A header value as it travels: the UTF-8 bytes read as Latin-1; control characters replaced. */
const headerSafe = (value: string) =>
  Buffer.from(value, "utf8")
    .toString("latin1")
    // eslint-disable-next-line no-control-regex -- the control characters are what it replaces
    .replace(/[\x00-\x08\x0a-\x1f\x7f]/g, "?");

const sqlish = [
  "' OR '1'='1",
  "1; DROP TABLE events; --",
  '" OR 1=1 --',
  "' UNION SELECT * FROM api_keys --",
  "$1",
  "%s%s%s%n",
  "${jndi:ldap://x}",
];

interface Known {
  webhookId: string;
  eventId: string;
  otherWebhookId: string;
  otherEventId: string;
  inboxId: string;
}

function idArb(known: Known): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(known.webhookId, known.eventId, known.otherWebhookId, known.otherEventId, known.inboxId) },
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        "..",
        "../..",
        "%2e%2e",
        "%2e%2e%2fwebhooks",
        "..%2f..%2fadmin",
        "%00",
        "a%00b",
        `${known.webhookId}%00`,
        "%ZZ",
        "%",
        "%E0%A4%A",
        "%C3%28",
        "%FF%FE",
        "%ED%A0%80", // an encoded lone surrogate
        "%F0%9F%92%A9",
        "%2F",
        "%5C..%5C",
        "null",
        "undefined",
        "__proto__",
        "constructor",
        "-1",
        "1e309",
        "9".repeat(40),
        `wh_${"0".repeat(32)}`,
        `evt_${"f".repeat(32)}`,
        "%20",
        "+",
        ";",
        "a;b=c",
        "*",
        "~",
        "a".repeat(101),
        "a".repeat(3000),
        "%41".repeat(1000),
        "%C3%A9".repeat(500),
      ),
    },
    { weight: 2, arbitrary: fc.constantFrom(...sqlish).map(pctEncode) },
    { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map(pctEncode) },
    { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,40}$/) },
  );
}

const ROUTES = [
  "/v1/webhooks",
  "/v1/webhooks/{id}",
  "/v1/webhooks/{id}/secret",
  "/v1/events",
  "/v1/events/{id}",
  "/v1/events/{id}/replay",
  "/v1/inboxes/{id}/messages",
  "/v1/deliveries",
  "/v1/audit-log",
  "/healthz",
  "/readyz",
  "/metrics",
  "/admin/queues",
  "/",
  "/v1",
];

function pathArb(known: Known): fc.Arbitrary<string> {
  const routed = fc
    .tuple(
      fc.constantFrom(...ROUTES),
      idArb(known),
      fc.constantFrom("", "", "", "/", "//", "/..", "/%2e%2e/", ";x=1", "/extra"),
      fc.boolean(),
    )
    .map(([route, id, suffix, upper]) => {
      const path = route.replace("{id}", id) + suffix;
      return upper ? path.toUpperCase() : path;
    });
  const random = fc
    .tuple(fc.constantFrom("/", "/v1/", "//v1//", "/v1/../", "/%76%31/"), fc.array(idArb(known), { maxLength: 5 }))
    .map(([prefix, segments]) => prefix + segments.join("/"));
  return fc.oneof(
    { weight: 4, arbitrary: routed },
    { weight: 1, arbitrary: random },
    { weight: 1, arbitrary: fc.constantFrom("*", "/?", "/v1/webhooks#frag", "/v1/webhooks?") },
  );
}

function queryArb(known: Known): fc.Arbitrary<string> {
  const key = fc.oneof(
    fc.constantFrom("limit", "cursor", "event_id", "webhook_id", "inbox_id", "since", "until", "status", "event_type"),
    fc.constantFrom(
      "a[]",
      "a[b]",
      "limit[]",
      "limit[$gt]",
      "event_id[not]",
      "__proto__",
      "__proto__[admin]",
      "constructor",
      "hasOwnProperty",
      "toString",
      "",
      "%00",
      "%ZZ",
    ),
    fc.string({ unit: "binary", maxLength: 10 }).map(pctEncode),
  );
  const value = fc.oneof(
    fc.constantFrom(
      "0",
      "1",
      "-1",
      "50",
      "100",
      "101",
      "1.5",
      "1e309",
      "1e2",
      "0x10",
      "99999999999999999999999999",
      "NaN",
      "Infinity",
      "-0",
      "%205",
      "+5",
      "",
    ),
    fc.constantFrom(
      "pending",
      "delivered",
      "failed",
      "message.sent",
      "webhook.test",
      known.eventId,
      known.webhookId,
      known.otherEventId,
      known.otherWebhookId,
      known.inboxId,
    ),
    fc.constantFrom(
      "2026-01-01T00:00:00Z",
      "9999-12-31T23:59:59Z",
      "0000-01-01T00:00:00Z",
      "+275760-09-13T00:00:00.000Z",
      "2026-02-30T00:00:00Z",
      "2026-01-01T00:00:00+14:00",
      "2026-01-01",
    ),
    fc.constantFrom(
      "%00",
      "a%00b",
      "%ZZ",
      "%",
      "%C3%28",
      "a".repeat(3000),
      "MTIzLmFiYw",
      "AAAA",
      `${Buffer.from(`1.evt_${"0".repeat(32)}`).toString("base64url")}`,
    ),
    fc.constantFrom(...sqlish).map(pctEncode),
    fc.string({ unit: "binary", maxLength: 30 }).map(pctEncode),
  );
  const pair = fc.oneof({ weight: 5, arbitrary: fc.tuple(key, value).map(([k, v]) => `${k}=${v}`) }, { weight: 1, arbitrary: key });
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant("") },
    { weight: 5, arbitrary: fc.array(pair, { minLength: 1, maxLength: 6 }).map((pairs) => `?${pairs.join("&")}`) },
    // duplicate keys
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom("limit", "event_id", "inbox_id", "cursor"), value, value)
        .map(([k, v1, v2]) => `?${k}=${v1}&${k}=${v2}`),
    },
    { weight: 1, arbitrary: fc.constantFrom("?&&&", "?=", "?==&=", "?limit", "?;limit=1", `?${"a=1&".repeat(1000)}`) },
  );
}

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=utf-16",
  "application/json; charset=latin1",
  "application/json; charset=bogus",
  "application/json;;;",
  "APPLICATION/JSON",
  "application/vnd.api+json",
  "application/json-patch+json",
  "text/plain",
  "text/json",
  "message/rfc822",
  "message/rfc822; charset=utf-8",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "*/*",
  ";;=",
  "",
];

/** `arb` one time in `every`, else undefined. */
const oneIn = <T>(every: number, arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: every - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

function headersArb(): fc.Arbitrary<{ headers: Record<string, string>; as: HostileRequest["as"] }> {
  const idempotencyKey = fc.oneof(
    fc.constantFrom("idem-1", "idem-2", "idem-3"),
    fc.constantFrom("", " ", "a b", "\t", "k".repeat(256), "k".repeat(6000), "ключ-идемпотентности", "🔑", "%00"),
    fc.string({ unit: "binary", maxLength: 40 }),
  );
  return fc
    .record(
      {
        as: fc.constantFrom<HostileRequest["as"]>("main", "main", "main", "main", "main", "main", "main", "main", "other", "none"),
        badAuth: oneIn(
          12,
          fc.constantFrom(
            "Bearer",
            "Bearer ",
            "Basic YWRtaW46YWRtaW4=",
            "Bearer whk_000000000000_" + "A".repeat(43),
            "bearer  x y",
            "Token abc",
          ),
        ),
        contentType: fc.oneof(
          { weight: 1, arbitrary: fc.constant(undefined) },
          { weight: 4, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
        ),
        idempotencyKey: oneIn(3, idempotencyKey),
        contentEncoding: oneIn(10, fc.constantFrom("gzip", "deflate", "br", "identity", "x-bogus", "gzip, gzip")),
        extra: oneIn(
          6,
          fc.constantFrom<[string, string]>(
            ["x-http-method-override", "DELETE"],
            ["accept", "application/xml"],
            ["accept", "*/*;q=0.1, ;;"],
            ["x-forwarded-for", "127.0.0.1, ::1"],
            ["accept-charset", "utf-16"],
            ["expect", "100-continue"],
            ["range", "bytes=0-10"],
            ["if-none-match", "*"],
          ),
        ),
      },
      { requiredKeys: ["as"] },
    )
    .map(({ as, badAuth, contentType, idempotencyKey: idem, contentEncoding, extra }) => {
      const headers: Record<string, string> = {};
      if (badAuth !== undefined) headers.authorization = badAuth;
      if (contentType !== undefined) headers["content-type"] = contentType;
      if (idem !== undefined) headers["idempotency-key"] = headerSafe(idem);
      if (contentEncoding !== undefined) headers["content-encoding"] = contentEncoding;
      if (extra !== undefined) headers[extra[0]] = extra[1];
      return { headers, as: badAuth !== undefined ? ("none" as const) : as };
    });
}

const hostileValue = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    "",
    "\u0000",
    "a\u0000b",
    "\ud800",
    "\udfff\ud800",
    1e308,
    -1,
    2 ** 53 + 1,
    -0,
    [],
    {},
    true,
    "x".repeat(1000),
    "<script>alert(1)</script>",
    ...sqlish,
  ),
  fc.anything({ maxDepth: 2 }),
);

const URLS = [
  "https://example.com/h",
  "https://93.184.216.34/hook",
  "https://localhost:9/x",
  "https://[::1]/",
  "https://169.254.169.254/",
  "https://a.com/\u0000",
  "https://a.com/%00",
  "https://exa mple.com/",
  "https://例子.测试/",
  "https://xn--e1afmkfd.xn--p1ai/",
  "https://a.com:99999/",
  "https://a.com:0/",
  "HTTPS://A.COM/",
  "https:/a.com",
  "https:///a",
  "https://user:pw@a.com/",
  "javascript:alert(1)",
  "http://example.com/",
  `https://a.com/${"x".repeat(2100)}`,
  "https://%00/",
  "https://\ud800.com/",
];

/** Bodies shaped for one route each, with one hostile value somewhere (or none: then valid). */
function shapedBodies(known: Known) {
  const eventType = fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...EVENT_TYPES) },
    { weight: 1, arbitrary: fc.constantFrom("webhook.test", "message.nope", "", "MESSAGE.SENT") },
  );
  const event = fc
    .record({
      type: eventType,
      field: oneIn(
        2,
        fc.constantFrom(
          "messageId",
          "threadId",
          "inboxId",
          "from",
          "to",
          "subject",
          "status",
          "deliveredAt",
          "openCount",
          "openedAt",
          "url",
          "clickCount",
          "clickedAt",
          "body",
          "headers",
          "bounceType",
          "bounceCode",
          "bounceMessage",
          "bouncedAt",
          "extra",
          "__proto__",
        ),
      ),
      value: hostileValue,
      occurredAt: oneIn(
        3,
        fc.constantFrom<unknown>(
          "2026-01-01T00:00:00Z",
          "0000-01-01T00:00:00Z",
          "9999-12-31T23:59:59.999999999Z",
          "2026-02-30T00:00:00Z",
          "2026-01-01T00:00:00+14:00",
          "1970-01-01T00:00:00Z",
          0,
          null,
          "now",
        ),
      ),
    })
    .map(({ type, field, value, occurredAt }) => {
      const kind = (EVENT_TYPES as readonly string[]).includes(type) ? type : "message.sent";
      const data = sampleData(kind, { inboxId: known.inboxId });
      if (field !== undefined) data[field] = value;
      return { event_type: type, data, ...(occurredAt !== undefined ? { occurred_at: occurredAt } : {}) };
    });
  // Identifiers at their length limits in UTF-16 units but several bytes per character in UTF-8.
  const multibyte = (min: number, max: number) =>
    fc.array(fc.integer({ min: 0x4e00, max: 0x9fff }), { minLength: min, maxLength: max }).map((codes) => String.fromCharCode(...codes));
  const bigIds = fc
    .record({
      type: fc.constantFrom(...EVENT_TYPES),
      messageId: multibyte(900, 998),
      inboxId: multibyte(150, 200),
      threadId: multibyte(900, 998),
    })
    .map(({ type, messageId, inboxId, threadId }) => ({
      event_type: type,
      data: sampleData(type, {
        messageId,
        inboxId,
        threadId,
        ...(type === "message.received" ? { headers: { messageId, inReplyTo: "", references: "" } } : {}),
      }),
    }));
  const webhook = fc.record(
    {
      url: fc.oneof(fc.constantFrom(...URLS), fc.string({ maxLength: 30 })),
      events: fc.oneof(fc.subarray([...EVENT_TYPES]), fc.array(hostileValue, { maxLength: 3 })),
      status: hostileValue,
    },
    { requiredKeys: [] },
  );
  const replay = fc.record(
    {
      target_url: fc.oneof(fc.constantFrom(...URLS), hostileValue),
      webhook_id: fc.oneof(fc.constantFrom(known.webhookId, known.otherWebhookId, "", "x".repeat(200)), hostileValue),
    },
    { requiredKeys: [] },
  );
  return { event, bigIds, webhook, replay };
}

function jsonBodyArb(known: Known): fc.Arbitrary<unknown> {
  const { event, bigIds, webhook, replay } = shapedBodies(known);
  return fc.oneof(
    { weight: 4, arbitrary: event },
    { weight: 1, arbitrary: bigIds },
    { weight: 3, arbitrary: webhook },
    { weight: 3, arbitrary: replay },
    { weight: 2, arbitrary: fc.anything({ maxDepth: 3 }) },
  );
}

const NESTING = [
  "[".repeat(10_000),
  `${"[".repeat(10_000)}${"]".repeat(10_000)}`,
  `${'{"a":'.repeat(5_000)}1${"}".repeat(5_000)}`,
  `{"data":${"[".repeat(10_000)}${"]".repeat(10_000)},"event_type":"message.sent"}`,
];

function rawMessageArb(): fc.Arbitrary<string> {
  const headerName = fc.oneof(
    fc.constantFrom(
      "From",
      "To",
      "Subject",
      "Message-ID",
      "In-Reply-To",
      "References",
      "Content-Type",
      "Content-Transfer-Encoding",
      "MIME-Version",
      "Date",
    ),
    fc.string({ maxLength: 10 }),
  );
  const headerValue = fc.oneof(
    fc.constantFrom(
      "alice@example.com",
      "<a@b>",
      "",
      "<>",
      "<<<>>>",
      "multipart/report; report-type=delivery-status; boundary=b",
      "multipart/mixed; boundary=",
      "base64",
      "quoted-printable",
      "=?utf-8?B?////?=",
      "=?bogus?Q?x?=",
      "\u0000",
      "Undisclosed recipients:;",
    ),
    fc.string({ unit: "binary", maxLength: 60 }),
  );
  return fc
    .tuple(
      fc.array(fc.tuple(headerName, headerValue), { maxLength: 8 }),
      fc.string({ unit: "binary", maxLength: 300 }),
      fc.constantFrom("\r\n", "\n", "\r"),
    )
    .map(([headers, body, eol]) => `${headers.map(([n, v]) => `${n}: ${v}`).join(eol)}${eol}${eol}${body}`);
}

function bodyArb(known: Known): fc.Arbitrary<Buffer | undefined> {
  const utf8 = (s: string) => Buffer.from(s, "utf8");
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 3, arbitrary: fc.json({ maxDepth: 3 }).map(utf8) },
    { weight: 6, arbitrary: jsonBodyArb(known).map((v) => utf8(JSON.stringify(v) ?? "null")) },
    {
      weight: 2,
      arbitrary: fc.tuple(jsonBodyArb(known), fc.nat()).map(([v, n]) => {
        const s = JSON.stringify(v) ?? "{}";
        return utf8(s.slice(0, n % Math.max(1, s.length)));
      }),
    },
    { weight: 1, arbitrary: fc.constantFrom(...NESTING).map(utf8) },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom(
          '{"__proto__":{"admin":true},"url":"https://example.com/p","events":["message.sent"]}',
          '{"constructor":{"prototype":{"polluted":1}}}',
          '{"url":"https://a.com","url":"https://example.com/dup","events":["message.sent"]}',
          '{"url":"https://a.com/\\u0000","events":["message.sent"]}',
          '{"target_url":"\\ud800"}',
          '{"limit":1e400}',
          "\ufeff{}",
          "null",
          "0",
          '""',
          "[]",
          "{}",
          " ",
          "\u0000",
        )
        .map(utf8),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2000 }).map((a) => Buffer.from(a)) },
    { weight: 2, arbitrary: rawMessageArb().map(utf8) },
    { weight: 1, arbitrary: fc.json({ maxDepth: 2 }).map((s) => Buffer.from(s, "utf16le")) },
  );
}

function requestArb(known: Known): fc.Arbitrary<HostileRequest> {
  return fc
    .record({
      method: fc.constantFrom("GET", "GET", "POST", "POST", "POST", "PATCH", "PUT", "DELETE", "HEAD", "OPTIONS"),
      path: pathArb(known),
      query: queryArb(known),
      headers: headersArb(),
      body: bodyArb(known),
      chunked: fc.boolean(),
    })
    .map(({ method, path, query, headers, body, chunked }) => ({
      method,
      path: path + query,
      headers: headers.headers,
      body,
      chunked,
      as: headers.as,
    }));
}

/** Requests tailored to one route each, so that every route gets its share of deep input. */
function routedRequestArb(known: Known): fc.Arbitrary<HostileRequest> {
  const shaped = shapedBodies(known);
  const json = (arb: fc.Arbitrary<unknown>) => arb.map((v) => Buffer.from(JSON.stringify(v) ?? "null", "utf8"));
  const route = (method: string, path: string, contentType: string | undefined, body: fc.Arbitrary<Buffer | undefined>) =>
    fc.record({
      method: fc.constant(method),
      path: fc.constant(path),
      contentType: fc.constant(contentType),
      body: fc.oneof(body, bodyArb(known)),
    });
  return fc
    .record({
      route: fc.oneof(
        { weight: 2, arbitrary: route("POST", "/v1/webhooks", "application/json", json(shaped.webhook)) },
        { weight: 1, arbitrary: route("PATCH", `/v1/webhooks/${known.webhookId}`, "application/json", json(shaped.webhook)) },
        {
          weight: 3,
          arbitrary: route(
            "POST",
            "/v1/events",
            "application/json",
            json(fc.oneof({ weight: 4, arbitrary: shaped.event }, { weight: 1, arbitrary: shaped.bigIds })),
          ),
        },
        { weight: 2, arbitrary: route("POST", `/v1/events/${known.eventId}/replay`, "application/json", json(shaped.replay)) },
        {
          weight: 2,
          arbitrary: route(
            "POST",
            `/v1/inboxes/${known.inboxId}/messages`,
            "message/rfc822",
            rawMessageArb().map((m) => Buffer.from(m, "utf8")),
          ),
        },
        { weight: 1, arbitrary: route("GET", "/v1/events", undefined, fc.constant(undefined)) },
        { weight: 1, arbitrary: route("GET", "/v1/deliveries", undefined, fc.constant(undefined)) },
        { weight: 1, arbitrary: route("GET", "/v1/audit-log", undefined, fc.constant(undefined)) },
        { weight: 1, arbitrary: route("GET", "/v1/webhooks", undefined, fc.constant(undefined)) },
      ),
      query: queryArb(known),
      idem: oneIn(3, fc.constantFrom("idem-1", "idem-2", "idem-3", "ключ", "k".repeat(300))),
      chunked: fc.boolean(),
    })
    .map(({ route: { method, path, contentType, body }, query, idem, chunked }) => {
      const headers: Record<string, string> = {};
      if (contentType && body !== undefined) headers["content-type"] = contentType;
      if (idem !== undefined) headers["idempotency-key"] = headerSafe(idem);
      return {
        method,
        path: method === "GET" ? path + query : path,
        headers,
        body: method === "GET" ? undefined : body,
        chunked,
        as: "main" as const,
      };
    });
}

// ---------------------------------------------------------------------------------------------

describe("hostile input at every route", () => {
  let stack: Stack;
  let main: Account;
  let other: Account;
  let known: Known;
  /** Rows that 2xx answers created, per account. */
  const created = new Map<string, { webhooks: number; events: number; replays: number }>();
  const statuses = new Map<number, number>();
  let requests = 0;

  const counts = async (accountId: string) => ({
    webhooks: await stack.prisma.webhook.count({ where: { accountId } }),
    events: await stack.prisma.event.count({ where: { accountId } }),
    replays: await stack.prisma.replay.count({ where: { accountId } }),
  });
  let before: Map<string, { webhooks: number; events: number; replays: number }>;

  beforeAll(async () => {
    // No dispatcher: nothing is sent anywhere; what matters is what the API answers and stores.
    stack = await startStack({ dispatcher: false, env: { ALLOW_PRIVATE_TARGETS: "false" } });
    main = await stack.newAccount();
    other = await stack.newAccount();
    const hook = await main.api("POST", "/v1/webhooks", { url: "https://localhost:9/hostile", events: [...EVENT_TYPES] });
    const inboxId = `inbox_${randomUUID()}`;
    const event = await main.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent", { inboxId }) });
    const otherHook = await other.api("POST", "/v1/webhooks", { url: "https://localhost:9/other", events: ["message.sent"] });
    const otherEvent = await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect([hook.status, event.status, otherHook.status, otherEvent.status]).toEqual([201, 201, 201, 201]);
    known = {
      webhookId: hook.body.id,
      eventId: event.body.event_id,
      otherWebhookId: otherHook.body.id,
      otherEventId: otherEvent.body.event_id,
      inboxId,
    };
    before = new Map([
      [main.accountId, await counts(main.accountId)],
      [other.accountId, await counts(other.accountId)],
    ]);
    for (const id of [main.accountId, other.accountId]) created.set(id, { webhooks: 0, events: 0, replays: 0 });
  });
  afterAll(() => stack.close());

  /** Sends `request` and checks the property; tallies what 2xx answers created. */
  const check = async (request: HostileRequest) => {
    const account = request.as === "main" ? main : request.as === "other" ? other : null;
    const headers = { ...request.headers };
    if (account && headers.authorization === undefined) headers.authorization = `Bearer ${account.apiKey}`;
    // Framed either way, whatever the method (Node frames a GET's body only when told to).
    if (request.body !== undefined) {
      if (request.chunked) headers["transfer-encoding"] = "chunked";
      else headers["content-length"] = String(request.body.length);
    }
    const answer = await send(stack.baseUrl, { ...request, headers });
    requests++;
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    const context = `${request.method} ${request.path.slice(0, 300)} -> ${answer.status} ${answer.text.slice(0, 300)}`;

    // 304 is HTTP's own answer to a conditional GET (If-None-Match: *) of a 200; no other 3xx.
    const conditional =
      answer.status === 304 && (request.method === "GET" || request.method === "HEAD") && headers["if-none-match"] !== undefined;
    if (answer.status >= 500 || answer.status < 200 || (answer.status >= 300 && answer.status < 400 && !conditional)) {
      throw new Error(`unexpected status: ${context}`);
    }
    if (answer.status >= 400 && request.method !== "HEAD") {
      expect([context, answer.headers["content-type"]]).toEqual([context, expect.stringMatching(/^application\/json/)]);
      let body: any;
      try {
        body = JSON.parse(answer.text);
      } catch {
        throw new Error(`error body is not JSON: ${context}`);
      }
      expect([context, Object.keys(body)]).toEqual([context, ["error"]]);
      const error = body.error;
      expect([context, CONTRACT_CODES[error.code]]).toEqual([context, answer.status]);
      expect([context, typeof error.message, error.message.length > 0]).toEqual([context, "string", true]);
      expect([
        context,
        Object.keys(error)
          .filter((k) => k !== "details")
          .sort(),
      ]).toEqual([context, ["code", "message"]]);
      if ("details" in error) {
        expect([context, Array.isArray(error.details)]).toEqual([context, true]);
        for (const d of error.details)
          expect([context, Object.keys(d).sort(), typeof d.path, typeof d.message]).toEqual([
            context,
            ["message", "path"],
            "string",
            "string",
          ]);
      }
    }
    if (answer.status >= 200 && answer.status < 300 && account && request.method !== "HEAD" && answer.text) {
      let body: any = null;
      try {
        body = JSON.parse(answer.text);
      } catch {
        // OPTIONS answers "GET,HEAD,..." as text; /metrics is text too.
      }
      const tally = created.get(account.accountId)!;
      if (answer.status === 201 && typeof body?.id === "string" && body.id.startsWith("wh_") && typeof body.secret === "string")
        tally.webhooks++;
      if (answer.status === 201 && typeof body?.event_id === "string") tally.events++;
      if (answer.status === 202 && Array.isArray(body?.replays)) tally.replays += body.replays.length;
    }
  };

  /** Inputs that once answered 500, run first on every run. */
  const regressions = (): [HostileRequest][] => {
    const json = (value: unknown) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8");
    const req = (method: string, path: string, body?: Buffer, headers: Record<string, string> = {}): [HostileRequest] => [
      {
        method,
        path,
        body,
        headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
        chunked: false,
        as: "main",
      },
    ];
    const cjk = (n: number) => Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join("");
    const rfc822 = { "content-type": "message/rfc822" };
    const hook = { url: "https://example.com/h", events: ["message.sent"] };
    return [
      // A body that is not the gzip its Content-Encoding announces (body-parser's 400 had no type).
      req("POST", "/v1/webhooks", json(hook), { "content-encoding": "gzip" }),
      req("POST", "/v1/events", json(hook), { "content-encoding": "deflate" }),
      req("POST", "/v1/events", json(hook), { "content-encoding": "br" }),
      // Path ids that are not valid percent-encoding (the router's URIError).
      req("GET", "/v1/webhooks/%ZZ"),
      req("DELETE", "/v1/webhooks/%E0%A4%A"),
      req("POST", "/v1/events/%C3%28/replay"),
      req("POST", "/v1/inboxes/%ZZ/messages", Buffer.from("From: a@b.c\r\n\r\nx"), rfc822),
      // NUL characters, which PostgreSQL text cannot hold: in URLs, ids, filters and stored fields.
      req("POST", "/v1/webhooks", json({ ...hook, url: "https://a.com/\u0000" })),
      req("PATCH", `/v1/webhooks/${known.webhookId}`, json({ url: "https://a.com/\u0000x" })),
      req("POST", `/v1/events/${known.eventId}/replay`, json({ target_url: "https://a.com/\u0000" })),
      req("GET", "/v1/webhooks/a%00b"),
      req("GET", "/v1/webhooks/%00/secret"),
      req("PATCH", "/v1/webhooks/%00", json({ status: "disabled" })),
      req("DELETE", "/v1/webhooks/%00"),
      req("GET", "/v1/events/%00"),
      req("POST", "/v1/events/%00/replay"),
      req("GET", "/v1/deliveries?event_id=a%00b"),
      req("GET", "/v1/deliveries?webhook_id=%00"),
      req("GET", "/v1/audit-log?event_id=%00"),
      req("GET", "/v1/events?inbox_id=%00"),
      req("POST", "/v1/events", json({ event_type: "message.sent", data: sampleData("message.sent", { inboxId: "a\u0000b" }) })),
      req("POST", "/v1/events", json({ event_type: "message.opened", data: sampleData("message.opened", { messageId: "<\u0000@x>" }) })),
      req("POST", "/v1/events", json({ event_type: "message.clicked", data: sampleData("message.clicked", { threadId: "\u0000" }) })),
      // A Message-ID of 998 CJK characters (2994 bytes): over PostgreSQL's btree entry limit.
      req(
        "POST",
        "/v1/events",
        json({ event_type: "message.sent", data: sampleData("message.sent", { messageId: cjk(998), inboxId: cjk(200) }) }),
      ),
      // Timestamps at the edges of what PostgreSQL and JavaScript dates can hold.
      ...["0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"].flatMap((occurredAt) => [
        req("POST", "/v1/events", json({ event_type: "message.sent", data: sampleData("message.sent"), occurred_at: occurredAt })),
        req("POST", "/v1/events", json({ event_type: "message.sent", data: sampleData("message.sent"), occurred_at: occurredAt }), {
          "idempotency-key": `edge-${occurredAt}`,
        }),
      ]),
      ...["/v1/events", "/v1/audit-log"].flatMap((list) => [
        req("GET", `${list}?since=0000-01-01T00:00:00Z`),
        req("GET", `${list}?until=0000-12-31T23:59:59%2B14:00`),
        req("GET", `${list}?since=0001-01-01T00:00:00Z&until=9999-12-31T23:59:59Z`),
      ]),
      // Cursors at the edges of their time range.
      ...[`999999999999999.evt_${"0".repeat(32)}`, `0.evt_${"0".repeat(32)}`, `8640000000000000.evt_${"0".repeat(32)}`].flatMap((cursor) =>
        ["/v1/events", "/v1/deliveries", "/v1/audit-log", "/v1/webhooks"].map((list) =>
          req("GET", `${list}?cursor=${Buffer.from(cursor).toString("base64url")}`),
        ),
      ),
      // Raw messages whose ids carry a NUL byte.
      req(
        "POST",
        `/v1/inboxes/${known.inboxId}/messages`,
        Buffer.from("From: a@example.com\r\nTo: b@example.com\r\nMessage-ID: <a\u0000b@x>\r\n\r\nhi"),
        rfc822,
      ),
      req(
        "POST",
        `/v1/inboxes/${known.inboxId}/messages`,
        Buffer.from("From: a@example.com\r\nTo: b@example.com\r\nIn-Reply-To: <a\u0000b@x>\r\nReferences: <c\u0000@x>\r\n\r\nhi"),
        rfc822,
      ),
    ];
  };

  // HOSTILE_RUNS=5000 for a longer hunt (the time limits then stop applying).
  const runs = Number(process.env.HOSTILE_RUNS ?? 150);
  const soak = process.env.HOSTILE_RUNS !== undefined;

  test("any method, path, query, header and body: never a 5xx, every 4xx in the contract's error shape", async () => {
    const started = Date.now();
    await fc.assert(fc.asyncProperty(requestArb(known), check), {
      numRuns: runs,
      examples: regressions(),
      ...(soak ? {} : { interruptAfterTimeLimit: 12_000, markInterruptAsFailure: false }),
    });
    await fc.assert(fc.asyncProperty(routedRequestArb(known), check), {
      numRuns: runs,
      ...(soak ? {} : { interruptAfterTimeLimit: 8_000, markInterruptAsFailure: false }),
    });
    // Enough was tried, and not only one kind of answer.
    expect(requests).toBeGreaterThanOrEqual(150);
    expect(statuses.size).toBeGreaterThanOrEqual(5);
    if (!soak) expect(Date.now() - started).toBeLessThan(25_000);
    if (process.env.HOSTILE_VERBOSE)
      console.log(
        requests,
        [...statuses].sort(([x], [y]) => x - y),
      );
  });

  test("nothing was stored but what 2xx answers created", async () => {
    for (const account of [main, other]) {
      const now = await counts(account.accountId);
      const was = before.get(account.accountId)!;
      const tally = created.get(account.accountId)!;
      expect(now).toEqual({
        webhooks: was.webhooks + tally.webhooks,
        events: was.events + tally.events,
        replays: was.replays + tally.replays,
      });
    }
    // No idempotency key of these accounts points at an event that is not there, and no
    // destination dangles (other test files share the database and may make rows of their own).
    const accounts = [main.accountId, other.accountId];
    const orphans = await stack.prisma.$queryRaw<{ n: number }[]>`
      SELECT (SELECT count(*)::int FROM idempotency_keys k WHERE k.account_id = ANY(${accounts}::text[]) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = k.event_id))
           + (SELECT count(*)::int FROM destinations d WHERE d.account_id = ANY(${accounts}::text[]) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)) AS n`;
    expect(orphans[0].n).toBe(0);
  });

  test("the API still answers", async () => {
    const health = await callApi(stack.baseUrl, null, "GET", "/healthz");
    expect(health.status).toBe(200);
    const ready = await callApi(stack.baseUrl, null, "GET", "/readyz");
    expect(ready.status).toBe(200);
    const event = await main.api("POST", "/v1/events", { event_type: "message.opened", data: sampleData("message.opened") });
    expect(event.status).toBe(201);
  });
});
