import { startStack, type Stack } from "../support/stack.js";
import { expectNoInlineCode, signIn } from "./support.js";

/**
 * The dashboard's side of `signature_scheme` (docs/receivers/standard-webhooks.md): a webhook's
 * page shows how its requests are signed, and the Add webhook and Edit forms choose it; `standard`
 * for a secret made in the URL-safe alphabet is refused on the field, in the dashboard's words.
 */
describe("dashboard: signatures (service or Standard Webhooks)", () => {
  let stack: Stack;
  beforeAll(async () => {
    // Pages and what they store: no deliveries needed.
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack.close());

  const idOf = (html: string) => /href="\/dashboard\/webhooks\/(wh_[0-9a-f]{32})"/.exec(html)?.[1];

  test("Add webhook offers the choice (service by default); choosing Standard Webhooks makes a standard webhook, shown on its page", async () => {
    const account = await stack.newAccount();
    const session = await signIn(stack, account);
    const form = await session.get("/dashboard/webhooks/new");
    expect(form.text).toContain('<label for="signature_scheme">Signatures</label>');
    expect(form.text).toMatch(/<option value="service" selected>Service \(X-Service-Signature\)<\/option>/);
    expect(form.text).toContain('<option value="standard">Standard Webhooks (webhook-signature)</option>');
    expectNoInlineCode(form.text);

    const created = await session.post("/dashboard/webhooks", {
      url: "https://receiver.example/standard",
      events: ["message.sent"],
      signature_scheme: "standard",
    });
    expect(created.status).toBe(201);
    expect(created.text).toContain("<code>webhook-signature</code>");
    const id = idOf(created.text)!;
    expect((await account.api("GET", `/v1/webhooks/${id}`)).body.signature_scheme).toBe("standard");
    const page = await session.get(`/dashboard/webhooks/${id}`);
    expect(page.text).toContain("<dt>Signatures</dt><dd>Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature)</dd>");
    expect(page.text).toMatch(/<option value="standard" selected>/);
  });

  test("Edit: standard is refused on the field for a URL-safe secret, until the secret is rotated", async () => {
    const account = await stack.newAccount();
    const session = await signIn(stack, account);
    const created = await account.api("POST", "/v1/webhooks", { url: "https://receiver.example/legacy", events: ["message.sent"] });
    const id = created.body.id as string;
    // A secret made before secrets were standard base64 (stored as plaintext: read as it is).
    await stack.pool.query("UPDATE webhooks SET secret = $1 WHERE id = $2", [`whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`, id]);
    expect((await session.get(`/dashboard/webhooks/${id}`)).text).toContain(
      "<dt>Signatures</dt><dd>Service (X-Service-Timestamp, X-Service-Signature)</dd>",
    );
    const edit = { url: "https://receiver.example/legacy", events: ["message.sent"], signature_scheme: "standard" };
    const refused = await session.post(`/dashboard/webhooks/${id}`, edit);
    expect(refused.status).toBe(409);
    expect(refused.text).toMatch(/<p id="signature_scheme-error" class="error">[^<]*rotate the secret first[^<]*<\/p>/);
    expect(refused.text).not.toContain("signature_scheme &quot;standard&quot;"); // the page's words, not the API's message
    expect((await account.api("GET", `/v1/webhooks/${id}`)).body.signature_scheme).toBe("service");

    expect((await account.api("POST", `/v1/webhooks/${id}/secret/rotate`, { grace_seconds: 0 })).status).toBe(200);
    const saved = await session.post(`/dashboard/webhooks/${id}`, edit);
    expect(saved.status).toBe(303);
    expect((await account.api("GET", `/v1/webhooks/${id}`)).body.signature_scheme).toBe("standard");
    // An edit that leaves the field as it is keeps the scheme.
    const { signature_scheme: _kept, ...withoutScheme } = edit;
    expect((await session.post(`/dashboard/webhooks/${id}`, withoutScheme)).status).toBe(303);
    expect((await account.api("GET", `/v1/webhooks/${id}`)).body.signature_scheme).toBe("standard");
  });
});
