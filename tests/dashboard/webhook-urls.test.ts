import { startStack, type Stack } from "../support/stack.js";
import { signIn, type Session } from "./support.js";

/**
 * Issue 32 item 6: a webhook URL is stored as the WHATWG URL parser reads it, its host in ASCII
 * (`https://127。0。0。1/` was stored as written), and the dashboard's form accepts and refuses
 * exactly what the API does (it trimmed a leading BOM that the API refuses): both hand the field as
 * sent to one validation, validateWebhookUrl. No dispatcher: nothing is sent anywhere.
 */
describe("webhook URLs: one validation for the API and the dashboard, stored normalized", () => {
  let stack: Stack;
  let session: Session;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
    session = await signIn(stack);
  });
  afterAll(() => stack.close());

  const stored = async (id: string) =>
    (await stack.pool.query<{ url: string }>("SELECT url FROM webhooks WHERE id = $1", [id])).rows[0]?.url;
  const webhookCount = async () =>
    Number(
      (await stack.pool.query<{ n: string }>("SELECT count(*) AS n FROM webhooks WHERE account_id = $1", [stack.accountId])).rows[0].n,
    );
  const idOf = (html: string) => /href="\/dashboard\/webhooks\/(wh_[0-9a-f]{32})"/.exec(html)?.[1];

  test.each([
    ["https://127。0。0。1:9/full-width-dots", "https://127.0.0.1:9/full-width-dots"],
    ["https://ＬＯＣＡＬＨＯＳＴ:9/Full-Width", "https://localhost:9/Full-Width"],
    ["HTTPS://LocalHost:9", "https://localhost:9/"],
    ["https://localhost:9/a b", "https://localhost:9/a%20b"],
  ])("%s is stored and answered as %s, by the API and by the form", async (given, normalized) => {
    const created = await stack.api("POST", "/v1/webhooks", { url: given, events: ["message.sent"] });
    expect(created.status).toBe(201);
    expect(created.body.url).toBe(normalized);
    expect(await stored(created.body.id)).toBe(normalized);
    expect((await stack.api("GET", `/v1/webhooks/${created.body.id}`)).body.url).toBe(normalized);
    const patched = await stack.api("PATCH", `/v1/webhooks/${created.body.id}`, { url: given });
    expect(patched.body.url).toBe(normalized);

    const saved = await session.post("/dashboard/webhooks", { url: given, events: "message.sent" });
    expect(saved.status).toBe(201);
    const id = idOf(saved.text)!;
    expect(await stored(id)).toBe(normalized);
  });

  test.each([
    ["\ufeffhttps://localhost:9/bom", "must not contain invisible characters"],
    ["https://localhost:9/bom\ufeff", "must not contain invisible characters"],
    ["https://local\u200bhost:9/zero-width", "must not contain invisible characters"],
    ["  https://localhost:9/spaces", "must be an absolute https:// URL"],
    ["https://localhost:9/trailing\t", "must not contain control characters"],
    ["https://user:secret@localhost:9/", "must not carry credentials"],
  ])("%j is refused alike by the API and by the form, nothing stored", async (given, message) => {
    const before = await webhookCount();
    const api = await stack.api("POST", "/v1/webhooks", { url: given, events: ["message.sent"] });
    expect(api.status).toBe(422);
    expect(api.body.error.details).toEqual([{ path: "url", message: expect.stringContaining(message) }]);
    const form = await session.post("/dashboard/webhooks", { url: given, events: "message.sent" });
    expect(form.status).toBe(422);
    expect(form.text).toContain(`The URL ${message}`);
    expect(await webhookCount()).toBe(before);
  });
});
