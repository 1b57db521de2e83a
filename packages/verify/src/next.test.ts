import { withVerifiedWebhook } from "./next.js";
import { SECRET, ENVELOPE, signedRequest, WEBHOOK, withoutEventId } from "../test/signed.js";

// A Next.js App Router route handler is `(request: Request, context: { params: Promise<...> }) => Response`.
const POST = withVerifiedWebhook(SECRET, async (request: Request, webhook, context: { params: Promise<{ tenant: string }> }) =>
  Response.json({ webhook, text: await request.text(), tenant: (await context.params).tenant }),
);

const context = { params: Promise.resolve({ tenant: "acme" }) };

describe("@mailhooks/verify/next", () => {
  it("calls the handler with the event id and the envelope and Next's context, the request still readable", async () => {
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await POST(new Request("https://receiver.example.com/api/webhooks/acme", { method: "POST", headers, body }), context);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ webhook: WEBHOOK, text: body, tenant: "acme" });
  });

  it("answers 401 with a JSON error without calling the handler", async () => {
    let called = false;
    const guarded = withVerifiedWebhook(SECRET, () => {
      called = true;
      return new Response(null, { status: 204 });
    });
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await guarded(
      new Request("https://receiver.example.com/api/webhooks", {
        method: "POST",
        headers: { ...headers, "X-Service-Signature": headers["X-Service-Signature"].toUpperCase().replace("SHA256", "sha256") },
        body,
      }),
    );
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
    expect(called).toBe(false);
    const anonymous = withoutEventId(signedRequest(SECRET, ENVELOPE));
    const unkeyed = await guarded(new Request("https://receiver.example.com/api/webhooks", { method: "POST", ...anonymous }));
    expect(((await unkeyed.json()) as { error: { code: string } }).error.code).toBe("missing_header");
    expect(called).toBe(false);
  });
});
