import { checkAgainstDocument } from "./openapi-check.js";

/** The check wired into every e2e call refuses what the document does not describe. */

const json = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
  status,
  headers: new Headers({ "content-type": "application/json; charset=utf-8", ...headers }),
  text: JSON.stringify(body),
  body,
});
const webhook = {
  id: "wh_019a2b3c4d5e7f00a1b2c3d4e5f60718",
  url: "https://example.com/h",
  mode: "push",
  events: ["message.sent"],
  status: "enabled",
  disabled_reason: null,
  secret_activates_at: null,
  rate_limit: null,
  inbox_ids: null,
  headers: {},
  signature_scheme: "service",
  last_pulled_at: null,
  created_at: "2026-11-22T10:00:00.000Z",
  updated_at: "2026-11-22T10:00:00.000Z",
};
const notFound = { error: { code: "not_found", message: "webhook not found" } };

describe("checkAgainstDocument", () => {
  test("accepts a documented answer", () => {
    expect(() => checkAgainstDocument("GET", "/v1/webhooks?limit=2", json(200, { data: [webhook], next_cursor: null }))).not.toThrow();
    expect(() => checkAgainstDocument("GET", `/v1/webhooks/${webhook.id}`, json(404, notFound))).not.toThrow();
    expect(() =>
      checkAgainstDocument("DELETE", `/v1/webhooks/${webhook.id}`, { status: 204, headers: new Headers(), text: "", body: null }),
    ).not.toThrow();
  });

  test("refuses a missing or extra field, a wrong type and an undocumented status", () => {
    const { disabled_reason: _, ...withoutReason } = webhook;
    expect(() => checkAgainstDocument("GET", `/v1/webhooks/${webhook.id}`, json(200, withoutReason))).toThrow(/disabled_reason/);
    expect(() => checkAgainstDocument("GET", `/v1/webhooks/${webhook.id}`, json(200, { ...webhook, secret: "whsec_x" }))).toThrow(
      /additional/,
    );
    expect(() => checkAgainstDocument("GET", `/v1/webhooks/${webhook.id}`, json(200, { ...webhook, created_at: "yesterday" }))).toThrow(
      /created_at/,
    );
    expect(() =>
      checkAgainstDocument("GET", `/v1/webhooks/${webhook.id}`, json(409, { error: { code: "conflict", message: "x" } })),
    ).toThrow(/does not describe status 409/);
    expect(() => checkAgainstDocument("GET", `/v1/webhooks/${webhook.id}`, json(404, { error: { code: "nope", message: "x" } }))).toThrow(
      /code/,
    );
  });

  test("refuses a body where none is described, a wrong Content-Type and a missing required header", () => {
    expect(() => checkAgainstDocument("DELETE", `/v1/webhooks/${webhook.id}`, json(204, {}))).toThrow(/no body/);
    expect(() =>
      checkAgainstDocument("GET", "/healthz", {
        status: 200,
        headers: new Headers({ "content-type": "text/html" }),
        text: "ok",
        body: "ok",
      }),
    ).toThrow(/Content-Type/);
    expect(() => checkAgainstDocument("GET", "/v1/webhooks", json(429, { error: { code: "rate_limited", message: "slow down" } }))).toThrow(
      /Retry-After/,
    );
  });

  test("unknown routes must answer 404 in the error shape (under /v1 the key is checked first)", () => {
    expect(() =>
      checkAgainstDocument("GET", "/no-such-route", json(404, { error: { code: "not_found", message: "no route" } })),
    ).not.toThrow();
    expect(() =>
      checkAgainstDocument("DELETE", "/v1/events", json(404, { error: { code: "not_found", message: "no route" } })),
    ).not.toThrow();
    expect(() =>
      checkAgainstDocument(
        "GET",
        "/v1/no-such-route",
        json(401, { error: { code: "unauthorized", message: "key" } }, { "www-authenticate": "Bearer" }),
      ),
    ).not.toThrow();
    expect(() => checkAgainstDocument("GET", "/no-such-route", json(200, { ok: true }))).toThrow(/not in the document/);
    expect(() => checkAgainstDocument("GET", "/no-such-route", json(404, { message: "no route" }))).toThrow();
  });
});
