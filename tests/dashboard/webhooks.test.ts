import { startStack, waitUntil, type Stack } from "../support/stack.js";
import type { Receiver } from "@mailhooks/receiver";
import { expectNoInlineCode, signIn, waitForPage, type Session } from "./support.js";

/**
 * Settings > Webhooks at the HTML level (spec: "enter the URL, select events, save"; docs/api.md,
 * "Webhooks"; docs/dashboard.md): the form's labels, the secret shown once, the test event's outcome as it
 * arrives, the list's health columns, edit, disable and enable, the test event again, the
 * secret after a confirmation, delete after a confirmation, and refusals in words.
 */
describe("dashboard: Settings > Webhooks", () => {
  let stack: Stack;
  let receiver: Receiver;
  // Each endpoint has a path of its own; the receiver waits for its secret, which the test
  // learns from the page (the test event may arrive first).
  const secrets = new Map<string, { promise: Promise<string>; resolve: (secret: string) => void }>();
  const secretAt = (path: string) => {
    if (!secrets.has(path)) {
      let resolve!: (secret: string) => void;
      secrets.set(path, { promise: new Promise<string>((r) => (resolve = r)), resolve });
    }
    return secrets.get(path)!;
  };
  let paths = 0;
  const newPath = (name = "ok") => `/${name}-${++paths}`;
  beforeAll(async () => {
    stack = await startStack();
    receiver = await stack.startReceiver({
      secretFor: (p) => secretAt(p).promise,
      behavior: (a) => (a.path.startsWith("/down") ? { status: 503 } : {}),
    });
  });
  afterAll(() => stack.close());

  const secretOf = (html: string) => /<code id="secret-value">([^<]+)<\/code>/.exec(html)?.[1];
  const idOf = (html: string) => /href="\/dashboard\/webhooks\/(wh_[0-9a-f]{32})"/.exec(html)?.[1];

  async function freshSession(): Promise<{ session: Session; api: Stack["api"] }> {
    const account = await stack.newAccount();
    return { session: await signIn(stack, account), api: account.api };
  }

  test("the Add webhook form has a URL field, one checkbox per kind labelled with its name, and Save", async () => {
    const { session } = await freshSession();
    const list = await session.get("/dashboard/webhooks");
    expect(list.text).toContain("No webhooks yet");
    expect(list.text).toContain('href="/dashboard/webhooks/new">Add webhook</a>');
    const form = await session.get("/dashboard/webhooks/new");
    expect(form.status).toBe(200);
    expect(form.text).toMatch(/<label for="url">URL<\/label>\s*<input id="url" name="url" type="text"/);
    for (const kind of ["message.sent", "message.delivered", "message.opened", "message.clicked", "message.received", "message.bounced"]) {
      expect(form.text).toContain(
        `<input type="checkbox" id="event-${kind}" name="events" value="${kind}"><label for="event-${kind}">${kind}</label>`,
      );
    }
    expect(form.text).toContain('<button type="submit">Save</button>');
    expectNoInlineCode(form.text);
  });

  test("Save shows the secret once and the test event's outcome as it arrives; the list shows status, last outcome and the 24 h success rate", async () => {
    const { session, api } = await freshSession();
    const path = newPath();
    const created = await session.post("/dashboard/webhooks", { url: receiver.url(path), events: ["message.sent", "message.opened"] });
    expect(created.status).toBe(201);
    const secret = secretOf(created.text)!;
    const id = idOf(created.text)!;
    expect(secret).toMatch(/^whsec_/);
    expect((await api("GET", `/v1/webhooks/${id}/secret`)).body.secret).toBe(secret);
    expect(created.text).toContain('data-copy="secret-value"');
    // The test event's outcome: the page polls this fragment (htmx) until it is final.
    expect(created.text).toContain(`hx-get="/dashboard/webhooks/${id}/test-event"`);
    secretAt(path).resolve(secret);
    const outcome = await waitForPage(
      () => session.get(`/dashboard/webhooks/${id}/test-event`),
      (t) => t.includes("badge-delivered"),
    );
    expect(outcome.text).toContain("200, delivered");
    expect(outcome.text).not.toContain("hx-get"); // final: no more polling
    // The secret is not on any later page without the confirmation.
    const list = await session.get("/dashboard/webhooks");
    expect(list.text).not.toContain(secret);
    expect(list.text.replaceAll("<wbr>", "")).toContain(receiver.url(path)); // it may break after its separators
    expect(list.text).toContain("message.sent, message.opened");
    expect(list.text).toContain('badge-enabled">enabled');
    expect(list.text).toContain("200, delivered");
    expect(list.text).toContain("100 % (1 of 1)");
    expect((await session.get(`/dashboard/webhooks/${id}`)).text).not.toContain(secret);
  });

  test("a failing endpoint's test event shows as failed, in words", async () => {
    const { session } = await freshSession();
    const path = newPath("down");
    const created = await session.post("/dashboard/webhooks", { url: receiver.url(path), events: "message.sent" });
    const id = idOf(created.text)!;
    secretAt(path).resolve(secretOf(created.text)!);
    const outcome = await waitForPage(
      () => session.get(`/dashboard/webhooks/${id}/test-event`),
      (t) => t.includes("badge-failed"),
    );
    expect(outcome.text).toContain("503, refused by the endpoint");
    expect(outcome.text).toContain("must answer a POST with a 2xx status");
    const list = await session.get("/dashboard/webhooks");
    expect(list.text).toContain("0 % (0 of 1)");
    // Turned off by auto-disable (written here as the dispatcher would): the reason, in words.
    await stack.pool.query(`UPDATE webhooks SET status = 'disabled', disabled_reason = 'failing' WHERE id = $1`, [id]);
    for (const page of [await session.get("/dashboard/webhooks"), await session.get(`/dashboard/webhooks/${id}`)]) {
      expect(page.text).toContain('badge-disabled">disabled');
      expect(page.text).toContain("turned off automatically: every attempt failed for too long. Fix the endpoint, then enable it.");
    }
  });

  test("invalid input is refused in words, with the values kept: no URL, http://, javascript:, no event", async () => {
    const { session, api } = await freshSession();
    const empty = await session.post("/dashboard/webhooks", { url: "", events: "message.sent" });
    expect(empty.status).toBe(422);
    expect(empty.text).toContain("The URL must be an absolute https:// URL.");
    const http = await session.post("/dashboard/webhooks", { url: "http://example.com/hook", events: ["message.sent", "message.bounced"] });
    expect(http.status).toBe(422);
    expect(http.text).toContain('value="http://example.com/hook"');
    expect(http.text).toContain('value="message.bounced" checked>');
    expect(http.text).toContain('aria-invalid="true"');
    const script = await session.post("/dashboard/webhooks", {
      url: 'javascript:alert(1)//"><script>alert(2)</script>',
      events: "message.sent",
    });
    expect(script.status).toBe(422);
    expect(script.text).not.toContain("<script>alert(2)");
    expect(script.text).toContain('value="javascript:alert(1)//&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"');
    expectNoInlineCode(script.text);
    const none = await session.post("/dashboard/webhooks", { url: "https://example.com/hook" });
    expect(none.status).toBe(422);
    expect(none.text).toContain("Select at least one kind of event");
    expect((await api("GET", "/v1/webhooks")).body.data).toEqual([]);
  });

  test("edit, disable, enable, send the test event again, reveal the secret after a confirmation, rotate it, delete after a confirmation", async () => {
    const { session, api } = await freshSession();
    const path = newPath();
    const created = await session.post("/dashboard/webhooks", { url: receiver.url(path), events: "message.sent" });
    const id = idOf(created.text)!;
    const secret = secretOf(created.text)!;
    secretAt(path).resolve(secret);
    await waitForPage(
      () => session.get(`/dashboard/webhooks/${id}/test-event`),
      (t) => !t.includes("hx-get"),
    );

    const edited = await session.post(`/dashboard/webhooks/${id}`, {
      url: receiver.url(`${path}?v=2`),
      events: ["message.clicked", "message.received"],
    });
    expect(edited.status).toBe(303);
    expect(edited.headers.location).toBe(`/dashboard/webhooks/${id}?done=saved`);
    expect((await api("GET", `/v1/webhooks/${id}`)).body).toMatchObject({
      url: receiver.url(`${path}?v=2`),
      events: ["message.clicked", "message.received"],
    });
    const page = await session.get(edited.headers.location);
    expect(page.text).toContain("Saved.");
    const badEdit = await session.post(`/dashboard/webhooks/${id}`, { url: "ftp://example.com", events: "message.sent" });
    expect(badEdit.status).toBe(422);
    expect(badEdit.text).toContain("The URL must be an absolute https:// URL.");

    const disabled = await session.post(`/dashboard/webhooks/${id}/status`, { status: "disabled" });
    expect(disabled.status).toBe(303);
    expect((await api("GET", `/v1/webhooks/${id}`)).body.status).toBe("disabled");
    const disabledPage = await session.get(disabled.headers.location);
    expect(disabledPage.text).toContain("gets no new deliveries");
    expect(disabledPage.text).toContain("disabled by a person");
    expect(disabledPage.text).toContain('<button type="submit">Enable</button>');
    expect(disabledPage.text).not.toContain("Send test event");
    // A test event to a disabled webhook is refused in words.
    const refused = await session.post(`/dashboard/webhooks/${id}/test`);
    expect(refused.status).toBe(409);
    expect(refused.text).toContain("The webhook is disabled: enable it to send it a test event.");
    expect((await session.post(`/dashboard/webhooks/${id}/status`, { status: "enabled" })).status).toBe(303);
    expect((await api("GET", `/v1/webhooks/${id}`)).body.status).toBe("enabled");

    const before = await stack.prisma.testDelivery.count({ where: { webhookId: id } });
    const tested = await session.post(`/dashboard/webhooks/${id}/test`);
    expect(tested.status).toBe(303);
    expect(await stack.prisma.testDelivery.count({ where: { webhookId: id } })).toBe(before + 1);
    await receiver.waitFor(
      (arrivals) =>
        arrivals.filter((a) => a.path === path && a.event === "webhook.test" && JSON.parse(a.body).data.webhookId === id).length === 2,
    );

    const confirm = await session.get(`/dashboard/webhooks/${id}/secret`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain("Reveal secret</button>");
    expect(confirm.text).not.toContain(secret);
    const revealed = await session.post(`/dashboard/webhooks/${id}/secret`);
    expect(revealed.status).toBe(200);
    expect(secretOf(revealed.text)).toBe(secret);
    expect(revealed.headers["cache-control"]).toBe("no-store");

    // Rotation: the new secret once, signing at once or after a grace period.
    expect((await session.get(`/dashboard/webhooks/${id}/rotate`)).text).toContain("Rotate secret</button>");
    const now = await session.post(`/dashboard/webhooks/${id}/rotate`, { grace_seconds: "0" });
    expect(now.status).toBe(200);
    const rotated = secretOf(now.text)!;
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    expect((await api("GET", `/v1/webhooks/${id}/secret`)).body.secret).toBe(rotated);
    const asked = Date.now();
    const later = await session.post(`/dashboard/webhooks/${id}/rotate`, { grace_seconds: "3600" });
    const activatesAt = (await api("GET", `/v1/webhooks/${id}`)).body.secret_activates_at;
    expect(Date.parse(activatesAt)).toBeGreaterThanOrEqual(asked + 3_600_000 - 1);
    expect(later.text).toContain(`<time datetime="${activatesAt}"`);
    expect((await session.get(`/dashboard/webhooks/${id}`)).text).toContain("A rotated secret starts signing");
    const badGrace = await session.post(`/dashboard/webhooks/${id}/rotate`, { grace_seconds: "999999999" });
    expect(badGrace.status).toBe(422);
    expect(badGrace.text).toContain("must be from 0 to 604800");

    const ask = await session.get(`/dashboard/webhooks/${id}/delete`);
    expect(ask.text).toContain("Delete this webhook?");
    expect((await api("GET", `/v1/webhooks/${id}`)).status).toBe(200);
    const deleted = await session.post(`/dashboard/webhooks/${id}/delete`);
    expect(deleted.status).toBe(303);
    expect(deleted.headers.location).toBe("/dashboard/webhooks?deleted=1");
    expect((await api("GET", `/v1/webhooks/${id}`)).status).toBe(404);
    const gone = await session.get(`/dashboard/webhooks/${id}`);
    expect(gone.status).toBe(404);
    expect(gone.text).toContain("There is nothing here for your account");
    expect((await session.get(deleted.headers.location)).text).toContain("The webhook was deleted.");
  });

  test("another account's webhook answers 404 on every page and action, and is left unchanged", async () => {
    const owner = await freshSession();
    const path = newPath();
    const created = await owner.session.post("/dashboard/webhooks", { url: receiver.url(path), events: "message.sent" });
    const id = idOf(created.text)!;
    secretAt(path).resolve(secretOf(created.text)!);
    const { session: intruder } = await freshSession();
    for (const page of [
      `/dashboard/webhooks/${id}`,
      `/dashboard/webhooks/${id}/secret`,
      `/dashboard/webhooks/${id}/delete`,
      `/dashboard/webhooks/${id}/rotate`,
      `/dashboard/webhooks/${id}/test-event`,
    ]) {
      const res = await intruder.get(page);
      expect([page, res.status]).toEqual([page, 404]);
      // Neither the owner's endpoint URL nor its path appears.
      expect(res.text).not.toContain(receiver.url(path));
      expect(res.text).not.toContain(path);
    }
    for (const [page, form] of [
      [`/dashboard/webhooks/${id}`, { url: "https://evil.example/x", events: "message.sent" }],
      [`/dashboard/webhooks/${id}/status`, { status: "disabled" }],
      [`/dashboard/webhooks/${id}/test`, {}],
      [`/dashboard/webhooks/${id}/secret`, {}],
      [`/dashboard/webhooks/${id}/delete`, {}],
      [`/dashboard/webhooks/${id}/rotate`, { grace_seconds: "0" }],
    ] as const) {
      const res = await intruder.post(page, form);
      expect([page, res.status]).toEqual([page, 404]);
      expect(res.text).not.toMatch(/whsec_/);
      expect(res.text).not.toContain(path);
    }
    const still = await owner.api("GET", `/v1/webhooks/${id}`);
    expect(still.body).toMatchObject({ url: receiver.url(path), status: "enabled" });
    await waitUntil(
      () => stack.prisma.testDelivery.count({ where: { webhookId: id } }),
      (n) => n === 1,
      2_000,
    );
  });
});
