import { randomUUID } from "node:crypto";
import { startStack, type Stack } from "../support/stack.js";
import { expectNoInlineCode, signIn, type Session } from "./support.js";

/**
 * Settings > Webhooks and the webhook options (docs/api.md, "Webhooks"; docs/dashboard.md): the rate limit,
 * the inboxes and the request headers are set on the Add webhook form and on a webhook's
 * page; header values are typed once and shown as `***` afterwards, never rendered back (not
 * even on a refused form); "Send test event" lets one choose the kind.
 */
describe("dashboard: webhook options", () => {
  let stack: Stack;
  beforeAll(async () => {
    // Pages and what they store: no deliveries needed.
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack.close());

  const idOf = (html: string) => /href="\/dashboard\/webhooks\/(wh_[0-9a-f]{32})"/.exec(html)?.[1];

  async function freshSession(): Promise<{ session: Session; api: Stack["api"] }> {
    const account = await stack.newAccount();
    return { session: await signIn(stack, account), api: account.api };
  }

  test("the forms have Rate limit, Inboxes and request header rows, beside URL, the event checkboxes and Save", async () => {
    const { session } = await freshSession();
    const form = await session.get("/dashboard/webhooks/new");
    expect(form.text).toMatch(/<label for="url">URL<\/label>\s*<input id="url" name="url" type="text"/);
    expect(form.text).toContain('<label for="rate_limit">Rate limit</label>');
    expect(form.text).toContain('<label for="inbox_ids">Inboxes</label>');
    expect(form.text).toContain('<label for="header-name-0">Header 1 name</label>');
    expect(form.text).toContain(
      '<label for="header-value-0">Header 1 value</label><input id="header-value-0" name="header_value" type="password"',
    );
    expect(form.text).toContain('<button type="submit">Save</button>');
    expectNoInlineCode(form.text);
  });

  test("a webhook's page shows its rate limit and its waiting work (docs/scheduler.md)", async () => {
    const { session, api } = await freshSession();
    const created = await api("POST", "/v1/webhooks", { url: "https://receiver.example/waiting", events: ["message.sent"], rate_limit: 3 });
    expect(created.status).toBe(201);
    // No dispatcher runs here: its test event and three events wait in the work queue.
    for (let i = 0; i < 3; i++) {
      const data = {
        messageId: `<${randomUUID()}@x>`,
        threadId: "t",
        inboxId: "inbox_1",
        from: "a@example.com",
        to: ["b@example.org"],
        subject: "s",
        status: "sent",
      };
      expect((await api("POST", "/v1/events", { event_type: "message.sent", data })).status).toBe(201);
    }
    const page = await session.get(`/dashboard/webhooks/${created.body.id}`);
    expect(page.text).toContain("3 requests per second");
    expect(page.text).toContain("4 waiting, 0 being sent");
  });

  test("set on creation, shown on the webhook's page with header values as ***, edited (one header removed, one added), cleared", async () => {
    const { session, api } = await freshSession();
    const value = `Bearer gw_${randomUUID()}`;
    const created = await session.post("/dashboard/webhooks", {
      url: "https://receiver.example/opts",
      events: "message.sent",
      rate_limit: "50",
      inbox_ids: "inbox_a, inbox_b,,",
      header_name: ["Authorization", "", ""],
      header_value: [value, "", ""],
    });
    expect(created.status).toBe(201);
    expect(created.text).not.toContain(value);
    const id = idOf(created.text)!;
    expect((await api("GET", `/v1/webhooks/${id}`)).body).toMatchObject({
      rate_limit: 50,
      inbox_ids: ["inbox_a", "inbox_b"],
      headers: { Authorization: "***" },
    });

    const page = await session.get(`/dashboard/webhooks/${id}`);
    expect(page.text).toContain("50 requests per second");
    expect(page.text).toContain("inbox_a, inbox_b");
    expect(page.text).toContain('<code class="break">Authorization: ***</code>');
    expect(page.text).toContain(`value="50"`);
    expect(page.text).toMatch(/<input id="inbox_ids" name="inbox_ids" type="text"[^>]* value="inbox_a, inbox_b"/);
    expect(page.text).toContain('<label for="remove-header-0">Remove Authorization</label>');
    expect(page.text).not.toContain(value);

    // Remove Authorization, add X-Key; the rate limit and the inboxes stay as the form shows them.
    const edited = await session.post(`/dashboard/webhooks/${id}`, {
      url: "https://receiver.example/opts",
      events: "message.sent",
      rate_limit: "50",
      inbox_ids: "inbox_a,inbox_b",
      remove_headers: "Authorization",
      header_name: ["X-Key", ""],
      header_value: ["k1", ""],
    });
    expect(edited.status).toBe(303);
    expect((await api("GET", `/v1/webhooks/${id}`)).body).toMatchObject({
      rate_limit: 50,
      inbox_ids: ["inbox_a", "inbox_b"],
      headers: { "X-Key": "***" },
    });
    // Adding a header of the same name (any case) replaces its value; an untouched set stays.
    expect(
      (
        await session.post(`/dashboard/webhooks/${id}`, {
          url: "https://receiver.example/opts",
          events: "message.sent",
          header_name: "x-key",
          header_value: "k2",
        })
      ).status,
    ).toBe(303);
    expect((await api("GET", `/v1/webhooks/${id}`)).body.headers).toEqual({ "x-key": "***" });
    expect((await session.post(`/dashboard/webhooks/${id}`, { url: "https://receiver.example/opts", events: "message.sent" })).status).toBe(
      303,
    );
    expect((await api("GET", `/v1/webhooks/${id}`)).body).toMatchObject({ rate_limit: 50, headers: { "x-key": "***" } });

    // Emptied fields: no limit, every inbox.
    expect(
      (
        await session.post(`/dashboard/webhooks/${id}`, {
          url: "https://receiver.example/opts",
          events: "message.sent",
          rate_limit: "",
          inbox_ids: "",
        })
      ).status,
    ).toBe(303);
    expect((await api("GET", `/v1/webhooks/${id}`)).body).toMatchObject({ rate_limit: null, inbox_ids: null });
    const after = await session.get(`/dashboard/webhooks/${id}`);
    expect(after.text).toContain("No limit");
    expect(after.text).toContain("Every inbox");
  });

  test("refused in words, with the values kept but never a header value", async () => {
    const { session, api } = await freshSession();
    const value = `s_${randomUUID()}`;
    const refused = await session.post("/dashboard/webhooks", {
      url: "https://receiver.example/bad",
      events: "message.sent",
      rate_limit: "5000",
      header_name: ["X-Service-Thing", ""],
      header_value: [value, ""],
    });
    expect(refused.status).toBe(422);
    expect(refused.text).toContain("The rate limit must be null or a whole number from 1 to 1000.");
    expect(refused.text).toContain("Headers: header name is reserved: X-Service-* headers are set by the service.");
    expect(refused.text).toContain('value="X-Service-Thing"');
    expect(refused.text).not.toContain(value);
    expect(refused.text).toContain('value="5000"');
    const badInboxes = await session.post("/dashboard/webhooks", {
      url: "https://receiver.example/bad",
      events: "message.sent",
      inbox_ids: Array.from({ length: 101 }, (_, i) => `inbox_${i}`).join(","),
    });
    expect(badInboxes.status).toBe(422);
    expect(badInboxes.text).toContain("The inboxes: must list at most 100 inbox ids.");
    expect((await api("GET", "/v1/webhooks")).body.data).toEqual([]);
  });

  test("Send test event offers webhook.test and an example of each kind; the kind chosen is what is sent", async () => {
    const { session, api } = await freshSession();
    const created = await api("POST", "/v1/webhooks", { url: "https://receiver.example/kinds", events: ["message.sent"] });
    const id = created.body.id;
    const page = await session.get(`/dashboard/webhooks/${id}`);
    expect(page.text).toContain('<option value="" selected>webhook.test</option>');
    expect(page.text).toContain('<option value="message.bounced">message.bounced (example)</option>');
    expect(page.text).toContain("Send test event</button>");
    const sent = await session.post(`/dashboard/webhooks/${id}/test`, { event_type: "message.bounced" });
    expect(sent.status).toBe(303);
    const rows = await stack.prisma.testDelivery.findMany({ where: { webhookId: id }, orderBy: { createdAt: "asc" } });
    expect(rows.map((r) => r.eventType)).toEqual([null, "message.bounced"]);
    expect((await session.get(`/dashboard/webhooks/${id}`)).text).toContain("An example <code>message.bounced</code> envelope.");
    expect((await session.post(`/dashboard/webhooks/${id}/test`, { event_type: "message.exploded" })).status).toBe(422);
    expect(await stack.prisma.testDelivery.count({ where: { webhookId: id } })).toBe(2);
  });
});
