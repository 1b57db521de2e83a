import openapiTS, { astToString } from "openapi-typescript";
import { createOpenApiDocument } from "../../apps/api/src/openapi/document.js";
import { startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { eventOf, expectError, expectValidation, startHookReceiver, type HookReceiver } from "../support/hooks.js";

/**
 * POST /v1/webhooks/{id}/test (docs/api.md, "Webhooks"): 202 `{delivery_id}`, one signed test
 * request now, of the `webhook.test` kind or an example of one of the six kinds; and the
 * rotation's `{}` body that a generated client must accept (issue 20).
 */
describe("POST /v1/webhooks/{id}/test", () => {
  let stack: Stack;
  let acct: Account;
  let hr: HookReceiver;
  beforeAll(async () => {
    stack = await startStack();
    hr = await startHookReceiver(stack);
  });
  afterAll(() => stack.close());
  beforeEach(async () => {
    acct = await stack.newAccount();
  });

  let paths = 0;
  async function newHook() {
    const path = `/test-${++paths}`;
    const created = await acct.api("POST", "/v1/webhooks", { url: hr.url(path), events: ["message.sent"] });
    expect(created.status).toBe(201);
    hr.secrets.set(path, created.body.secret);
    return { id: created.body.id as string, path };
  }
  const testRows = (webhookId: string) =>
    stack.prisma.testDelivery.findMany({
      where: { webhookId },
      orderBy: { createdAt: "asc" },
      select: { id: true, eventType: true, deliveryId: true },
    });

  test("without event_type: 202 {delivery_id}, a webhook.test request now, recorded as a test delivery row without event", async () => {
    const hook = await newHook();
    // The creation's test request first.
    await hr.receiver.waitFor((a) => a.filter((x) => x.path === hook.path && x.verified).length === 1);
    const asked = await acct.api("POST", `/v1/webhooks/${hook.id}/test`);
    expect(asked.status).toBe(202);
    expect(Object.keys(asked.body)).toEqual(["delivery_id"]);
    expect(asked.body.delivery_id).toMatch(/^dlv_[0-9a-f]{32}$/);
    const rows = await testRows(hook.id);
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatchObject({ eventType: null, deliveryId: asked.body.delivery_id });
    const arrivals = await hr.receiver.waitFor((a) => a.filter((x) => x.path === hook.path && x.verified).length === 2);
    expect(arrivals.filter((x) => x.path === hook.path).map(eventOf)).toEqual(["webhook.test", "webhook.test"]);
    // Its one delivery row: trigger test, no event.
    const row = await waitUntil(
      () => stack.prisma.delivery.findFirst({ where: { testDeliveryId: rows[1].id } }),
      (r) => r !== null,
    );
    // The answer's delivery_id is that row's id, and the request carried it as X-Service-Event-Id.
    expect(row).toMatchObject({ id: asked.body.delivery_id, trigger: "test", eventId: null, webhookId: hook.id, attempt: 0 });
    expect(arrivals.filter((x) => x.path === hook.path)[1].headers["x-service-event-id"]).toBe(asked.body.delivery_id);
    // A JSON body `{}` is the same, and so is naming the kind: `webhook.test` is one of the kinds
    // the API lists (and the dashboard's Kind menu offers).
    expect((await acct.api("POST", `/v1/webhooks/${hook.id}/test`, {})).status).toBe(202);
    const named = await acct.api("POST", `/v1/webhooks/${hook.id}/test`, { event_type: "webhook.test" });
    expect(named.status).toBe(202);
    expect((await stack.prisma.testDelivery.findUniqueOrThrow({ where: { deliveryId: named.body.delivery_id } })).eventType).toBeNull();
    const all = await hr.receiver.waitFor((a) => a.filter((x) => x.path === hook.path && x.verified).length === 4);
    const namedArrival = all.find((x) => x.headers["x-service-event-id"] === named.body.delivery_id)!;
    expect(eventOf(namedArrival)).toBe("webhook.test");
    expect(JSON.parse(namedArrival.body).data).toEqual({ webhookId: hook.id, url: hr.url(hook.path) });
  });

  test("with one of the six kinds: the kind is stored for the dispatcher's example envelope; an unknown kind or field is 422", async () => {
    const hook = await newHook();
    for (const kind of ["message.sent", "message.delivered", "message.opened", "message.clicked", "message.received", "message.bounced"]) {
      const asked = await acct.api("POST", `/v1/webhooks/${hook.id}/test`, { event_type: kind });
      expect(asked.status).toBe(202);
      expect((await stack.prisma.testDelivery.findUniqueOrThrow({ where: { deliveryId: asked.body.delivery_id } })).eventType).toBe(kind);
    }
    const before = (await testRows(hook.id)).length;
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.id}/test`, { event_type: "message.exploded" }), "event_type");
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.id}/test`, { event_type: 5 }), "event_type");
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.id}/test`, { kind: "message.sent" }), "kind");
    expect(await testRows(hook.id)).toHaveLength(before);
  });

  test("unknown, deleted or another account's webhook: 404; a disabled webhook: 409 conflict, until enabled again", async () => {
    const hook = await newHook();
    expectError(await acct.api("POST", "/v1/webhooks/wh_00000000000000000000000000000000/test"), 404, "not_found");
    const other = await stack.newAccount();
    expectError(await other.api("POST", `/v1/webhooks/${hook.id}/test`), 404, "not_found");
    expectError(await other.api("POST", `/v1/webhooks/${hook.id}/test`, { event_type: "message.sent" }), 404, "not_found");

    expect((await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);
    expectError(await acct.api("POST", `/v1/webhooks/${hook.id}/test`), 409, "conflict");
    expect((await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "enabled" })).status).toBe(200);
    expect((await acct.api("POST", `/v1/webhooks/${hook.id}/test`)).status).toBe(202);

    expect((await acct.api("DELETE", `/v1/webhooks/${hook.id}`)).status).toBe(204);
    expectError(await acct.api("POST", `/v1/webhooks/${hook.id}/test`), 404, "not_found");
  });
});

describe("POST /v1/webhooks/{id}/secret/rotate with {} (issue 20)", () => {
  test("grace_seconds is optional in the document, so a client generated by openapi-typescript accepts {}", async () => {
    const doc = createOpenApiDocument() as any;
    const request = doc.components.schemas.RotateSecretRequest;
    expect(request.properties.grace_seconds).toMatchObject({ type: "integer", minimum: 0, maximum: 604800 });
    expect(request.required ?? []).not.toContain("grace_seconds");
    // The generated type itself: the property is optional.
    const types = astToString(await openapiTS(doc, { silent: true }));
    const rotate = /RotateSecretRequest: \{[^}]*\}/.exec(types)?.[0];
    expect(rotate).toMatch(/grace_seconds\?: number;/);
    // Every other optional request field stays optional too (webhook options).
    const create = /CreateWebhookRequest: \{[\s\S]*?\n {8}\};/.exec(types)?.[0];
    for (const field of ["rate_limit", "inbox_ids", "headers"]) expect(create).toMatch(new RegExp(`${field}\\?: `));
  });
});
