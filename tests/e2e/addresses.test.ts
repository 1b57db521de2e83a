import { verify } from "@mailhooks/verify";
import { createHook, emailArrivals, envelopeOf, expectValidation, startHookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";

/**
 * docs/api.md, "Events": `from` and each `to` of POST /v1/events hold RFC 5322 addresses, with
 * or without a display name, and travel byte for byte: what the receiver gets, what the API
 * stores and what it shows are the strings the platform sent.
 */
describe("RFC 5322 addresses in published events", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "200,400,600", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(() => stack.close());

  test("display names and quoted names reach the receiver and the stored payload unchanged", async () => {
    const account = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(account, hr, "/hooks/addresses", ["message.sent"]);
    const from = "Alice Example <alice@example.com>";
    const to = ['"Doe, John" <john@example.com>', "bob@example.org"];

    const published = await account.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { from, to }),
    });
    expect(published.status).toBe(201);

    const arrivals = await hr.receiver.waitFor((all) => emailArrivals(all, "/hooks/addresses").length > 0);
    const delivered = emailArrivals(arrivals, "/hooks/addresses");
    expect(delivered).toHaveLength(1);
    expect(
      verify(
        hook.secret,
        { "x-service-timestamp": delivered[0].timestamp, "x-service-signature": delivered[0].signature },
        delivered[0].body,
        { now: new Date(delivered[0].receivedAt) },
      ),
    ).toEqual(JSON.parse(delivered[0].body));

    const envelope = envelopeOf(delivered[0]);
    expect(envelope.data.from).toBe(from);
    expect(envelope.data.to).toEqual(to);
    // The exact JSON text, not only an equal value: nothing re-escaped or normalized.
    expect(delivered[0].body).toContain(`"from":${JSON.stringify(from)},"to":${JSON.stringify(to)}`);

    const detail = await waitUntil(
      () => account.api("GET", `/v1/events/${published.body.event_id}`),
      (r) => r.body.status === "delivered",
    );
    expect(detail.body.payload.data.from).toBe(from);
    expect(detail.body.payload.data.to).toEqual(to);
    expect(JSON.stringify(detail.body.payload)).toBe(delivered[0].body);
  });

  test.each([
    ["two addresses in one string", "data.to.1", { to: ["bob@example.org", "alice@example.com, bob@example.com"] }],
    ["a group", "data.from", { from: "Friends: alice@example.com, bob@example.com;" }],
    ["a line break", "data.from", { from: "Alice Example\r\n <alice@example.com>" }],
    ["garbage", "data.to.0", { to: ["not an address"] }],
  ])("%s is refused with 422 naming the field", async (_label, path, overrides) => {
    const res = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent", overrides) });
    expectValidation(res, path);
  });
});
