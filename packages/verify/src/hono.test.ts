import { Hono } from "hono";
import { verifyWebhook, type WebhookVariables } from "./hono.js";
import { ENVELOPE, SECRET, signedRequest, STANDARD_SECRET, standardSignedRequest, WEBHOOK, withoutEventId } from "../test/signed.js";

const app = new Hono<{ Variables: WebhookVariables }>();
app.post("/webhooks", verifyWebhook(SECRET), async (c) => c.json({ webhook: c.get("webhook"), reread: await c.req.json() }));

describe("@mailhooks/verify/hono", () => {
  it("verifies, stores the event id and the envelope as c.get('webhook') and leaves the body readable", async () => {
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await app.request("/webhooks", { method: "POST", headers, body });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ webhook: WEBHOOK, reread: ENVELOPE });
  });

  it("answers 401 with a JSON error for a wrong secret, an old request or missing headers", async () => {
    const cases = [
      [signedRequest("whsec_someone_else", ENVELOPE), "invalid_signature"],
      [signedRequest(SECRET, ENVELOPE, Math.floor(Date.now() / 1000) - 301), "timestamp_out_of_tolerance"],
      [{ body: JSON.stringify(ENVELOPE), headers: { "content-type": "application/json" } }, "missing_header"],
      [withoutEventId(signedRequest(SECRET, ENVELOPE)), "missing_header"],
    ] as const;
    for (const [{ body, headers }, code] of cases) {
      const res = await app.request("/webhooks", { method: "POST", headers, body });
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.json()).toEqual({ error: { code, message: expect.any(String) } });
    }
  });

  it('with { scheme: "standard" } (Web Crypto): verifies a Standard Webhooks request, refuses a tampered one', async () => {
    const standard = new Hono<{ Variables: WebhookVariables }>();
    standard.post("/webhooks", verifyWebhook(STANDARD_SECRET, { scheme: "standard" }), (c) => c.json({ webhook: c.get("webhook") }));
    const { body, headers } = standardSignedRequest([STANDARD_SECRET], ENVELOPE);
    const res = await standard.request("/webhooks", { method: "POST", headers, body });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ webhook: WEBHOOK });
    const tampered = await standard.request("/webhooks", { method: "POST", headers: { ...headers, "webhook-id": "evt_other" }, body });
    expect(tampered.status).toBe(401);
    expect(await tampered.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
  });
});
