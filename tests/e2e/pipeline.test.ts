import { verify } from "@mailhooks/verify";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";

describe("delivery pipeline", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "200,400,600", DELIVERY_TIMEOUT_MS: "1000" } });
  });
  afterAll(() => stack.close());

  test("a webhook gets its test event, then a signed event", async () => {
    let secret = "";
    const receiver = await stack.startReceiver({ secretFor: () => secret });
    const created = await stack.api("POST", "/v1/webhooks", { url: receiver.url("/hooks/a"), events: ["message.sent"] });
    expect(created.status).toBe(201);
    secret = created.body.secret;
    await receiver.waitFor((a) => a.some((x) => x.event === "webhook.test"));
    const data = sampleData("message.sent");
    const ev = await stack.api("POST", "/v1/events", { event_type: "message.sent", data });
    expect(ev.status).toBe(201);
    const arrivals = await receiver.waitFor((a) => a.some((x) => x.event === "message.sent"));
    const arrival = arrivals.find((x) => x.event === "message.sent")!;
    expect(
      verify(secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
        now: new Date(arrival.receivedAt),
      }),
    ).toEqual(JSON.parse(arrival.body));
    const detail = await waitUntil(
      () => stack.api("GET", `/v1/events/${ev.body.event_id}`),
      (r) => r.body.status === "delivered",
    );
    expect(JSON.stringify(detail.body.payload)).toBe(arrival.body);
    expect(detail.body.destinations).toEqual([
      { webhook_id: created.body.id, url: receiver.url("/hooks/a"), status: "delivered", attempts: 1 },
    ]);
  });
});
