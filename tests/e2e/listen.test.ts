import { verify } from "@mailhooks/verify";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { deliveryRows, expectError, expectValidation, startHookReceiver } from "../support/hooks.js";

/**
 * Listen webhooks (docs/develop-locally.md): a webhook with `url: null` and `mode: "listen"`
 * whose deliveries wait in PostgreSQL until pulled (GET /v1/webhooks/{id}/pending) and answered
 * (POST /v1/webhooks/{id}/pending/{delivery_id}). The dispatcher runs (its claim must never push
 * this work); retries are shortened by configuration.
 */

interface Pulled {
  delivery_id: string;
  event_id: string | null;
  trigger: string;
  attempt: number;
  headers: Record<string, string>;
  body: string;
}

describe("listen webhooks", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "1000,1000,1000" } });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  /** Each test has an account of its own: another test's webhooks never receive its events. */
  let api: Stack["api"];
  beforeEach(async () => {
    api = (await stack.newAccount()).api;
  });
  const createListen = async (events: string[], more: Record<string, unknown> = {}) => {
    const created = await api("POST", "/v1/webhooks", { url: null, mode: "listen", events, ...more });
    expect(created.status).toBe(201);
    return created.body as { id: string; secret: string; url: null; mode: string };
  };
  const pull = async (id: string, query = "") => {
    const res = await api("GET", `/v1/webhooks/${id}/pending${query}`);
    expect(res.status).toBe(200);
    return res.body.data as Pulled[];
  };
  const answer = (id: string, deliveryId: string, body: Record<string, unknown>) =>
    api("POST", `/v1/webhooks/${id}/pending/${deliveryId}`, body);
  const eventStatus = async (eventId: string) => (await api("GET", `/v1/events/${eventId}`)).body.status as string;

  test("is made with url null and mode listen; its test event is pulled, verifies, and its answer is the delivery row", async () => {
    const hook = await createListen(["message.received"]);
    expect(hook).toMatchObject({ url: null, mode: "listen", status: "enabled", last_pulled_at: null });

    const [test] = await pull(hook.id);
    expect(test).toMatchObject({ trigger: "test", attempt: 0, event_id: null });
    const envelope = verify(hook.secret, test.headers, test.body);
    expect(envelope).toMatchObject({ event: "webhook.test", data: { webhookId: hook.id, url: null } });
    expect(test.headers["x-service-event-id"]).toBe(test.delivery_id);
    expect(test.headers["content-type"]).toBe("application/json");
    // Held by that pull: nothing more to hand out.
    expect(await pull(hook.id)).toEqual([]);

    const recorded = await answer(hook.id, test.delivery_id, { status: 204, duration_ms: 7, response_body: "" });
    expect(recorded.status).toBe(200);
    expect(recorded.body).toMatchObject({ id: test.delivery_id, url: null, trigger: "test", response_status: 204, duration_ms: 7 });
    // An answer repeated (the CLI retried after a lost answer) is the same row, written once.
    expect((await answer(hook.id, test.delivery_id, { status: 204, duration_ms: 7 })).body).toEqual(recorded.body);
    expect((await deliveryRows({ api }, { webhook_id: hook.id })).map((r) => r.id)).toEqual([test.delivery_id]);
    const view = (await api("GET", `/v1/webhooks/${hook.id}`)).body;
    expect(Date.parse(view.last_pulled_at)).toBeGreaterThan(Date.now() - 60_000);
  }, 30_000);

  test("refuses what is not a listen webhook's shape, and pulls of what is not a live listen webhook", async () => {
    expectValidation(await api("POST", "/v1/webhooks", { url: null, events: ["message.sent"] }), "url");
    expectValidation(await api("POST", "/v1/webhooks", { url: "https://example.com/h", mode: "listen", events: ["message.sent"] }), "url");
    expectValidation(await api("POST", "/v1/webhooks", { url: null, mode: "pull", events: ["message.sent"] }), "mode");
    const hook = await createListen(["message.sent"]);
    expectError(await api("PATCH", `/v1/webhooks/${hook.id}`, { url: "https://example.com/h" }), 409, "conflict");
    expectValidation(await api("GET", `/v1/webhooks/${hook.id}/pending?wait=31`), "query.wait");
    expectValidation(await api("GET", `/v1/webhooks/${hook.id}/pending?limit=0`), "query.limit");
    expectValidation(await answer(hook.id, "dlv_0", { duration_ms: 1 }), "status");
    expectValidation(await answer(hook.id, "dlv_0", { status: 200, error: "timeout", duration_ms: 1 }), "status");
    expectError(await answer(hook.id, `dlv_${"0".repeat(32)}`, { status: 200, duration_ms: 1 }), 404, "not_found");

    const hr = await startHookReceiver(stack);
    const push = await api("POST", "/v1/webhooks", { url: hr.url("/push"), events: ["message.sent"] });
    expectError(await api("GET", `/v1/webhooks/${push.body.id}/pending`), 409, "conflict");
    const other = await stack.newAccount();
    expectError(await other.api("GET", `/v1/webhooks/${hook.id}/pending`), 404, "not_found");
    expect((await api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);
    expectError(await api("GET", `/v1/webhooks/${hook.id}/pending`), 409, "conflict");
  }, 30_000);

  test("events wait, oldest first, with the exact bytes and signed headers; 2xx delivers, the rest retry on the schedule, each retry pulled when due", async () => {
    const hook = await createListen(["message.sent"], { signature_scheme: "service" });
    const [test] = await pull(hook.id);
    expect((await answer(hook.id, test.delivery_id, { status: 200, duration_ms: 1 })).status).toBe(200);

    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      ids.push(res.body.event_id as string);
    }
    // The dispatcher never sends them: they wait.
    for (const id of ids) expect(await eventStatus(id)).toBe("pending");
    const items = await pull(hook.id, "?limit=2");
    expect(items.map((i) => [i.event_id, i.trigger, i.attempt])).toEqual([
      [ids[0], "initial", 0],
      [ids[1], "initial", 0],
    ]);
    for (const item of items) {
      const envelope = verify(hook.secret, item.headers, item.body);
      expect(envelope.event).toBe("message.sent");
      expect(item.headers["x-service-event-id"]).toBe(item.event_id);
    }
    const [third] = await pull(hook.id);
    expect(third.event_id).toBe(ids[2]);

    expect((await answer(hook.id, items[0].delivery_id, { status: 200, duration_ms: 3, response_body: "ok" })).status).toBe(200);
    expect((await answer(hook.id, items[1].delivery_id, { status: 500, duration_ms: 3, response_body: "boom" })).status).toBe(200);
    expect((await answer(hook.id, third.delivery_id, { error: "connection_error", duration_ms: 0 })).status).toBe(200);
    await waitUntil(
      () => eventStatus(ids[0]),
      (s) => s === "delivered",
    );

    // Both retries come due 1 s later: a waiting pull gets them then, each at attempt 1.
    const retries = await waitUntil(
      () => pull(hook.id, "?wait=5"),
      (got) => got.length > 0,
    );
    const all = retries.length === 2 ? retries : [...retries, ...(await pull(hook.id, "?wait=5"))];
    expect(all.map((r) => [r.event_id, r.trigger, r.attempt]).sort()).toEqual(
      [
        [ids[1], "retry", 1],
        [ids[2], "retry", 1],
      ].sort(),
    );
    for (const r of all) expect((await answer(hook.id, r.delivery_id, { status: 200, duration_ms: 2 })).status).toBe(200);
    for (const id of ids.slice(1))
      await waitUntil(
        () => eventStatus(id),
        (s) => s === "delivered",
      );
    const rows = await deliveryRows({ api }, { event_id: ids[1] });
    expect(rows.map((r) => [r.trigger, r.attempt, r.response_status, r.url])).toEqual([
      ["initial", 0, 500, null],
      ["retry", 1, 200, null],
    ]);
  }, 30_000);

  test("replays and tests of a listen webhook are pulled; pausing holds them; a replay to a target_url is pushed", async () => {
    const hook = await createListen(["message.delivered"], { signature_scheme: "standard" });
    const [test] = await pull(hook.id);
    expect((await answer(hook.id, test.delivery_id, { status: 200, duration_ms: 1 })).status).toBe(200);
    const sent = await api("POST", "/v1/events", { event_type: "message.delivered", data: sampleData("message.delivered") });
    const eventId = sent.body.event_id as string;
    const [initial] = await pull(hook.id);
    expect(initial.headers["webhook-id"]).toBe(eventId);
    expect(initial.headers["webhook-signature"]).toMatch(/^v1,/);
    expect((await answer(hook.id, initial.delivery_id, { status: 200, duration_ms: 1 })).status).toBe(200);

    expect((await api("PATCH", `/v1/webhooks/${hook.id}`, { status: "paused" })).status).toBe(200);
    const replay = await api("POST", `/v1/events/${eventId}/replay`, {});
    expect(replay.status).toBe(202);
    expect(replay.body.replays).toEqual([expect.objectContaining({ webhook_id: hook.id, destination_url: null })]);
    // Paused: nothing is handed out.
    expect(await pull(hook.id)).toEqual([]);
    expect((await api("PATCH", `/v1/webhooks/${hook.id}`, { status: "enabled" })).status).toBe(200);
    const [replayed] = await pull(hook.id, "?wait=5");
    expect(replayed).toMatchObject({ trigger: "replay", event_id: eventId, body: initial.body });
    expect((await answer(hook.id, replayed.delivery_id, { status: 202, duration_ms: 1 })).status).toBe(200);
    const audit = await api("GET", `/v1/audit-log?event_id=${eventId}`);
    expect(audit.body.data).toEqual([expect.objectContaining({ destination_url: null, response_status: 202 })]);

    // A replay to a target_url goes out as for any webhook, signed by the listen webhook's secret
    // under its scheme (standard: the headers a pulled item carries).
    const hr = await startHookReceiver(stack);
    const overridden = await api("POST", `/v1/events/${eventId}/replay`, { target_url: hr.url("/override") });
    expect(overridden.status).toBe(202);
    const arrivals = await hr.receiver.waitFor((all) => all.some((a) => a.path === "/override"));
    const pushed = arrivals.find((a) => a.path === "/override")!;
    expect(pushed.headers["webhook-id"]).toBe(eventId);
    expect(verify(hook.secret, pushed.headers as Record<string, string>, pushed.body, { scheme: "standard" }).event).toBe(
      "message.delivered",
    );

    const asked = await api("POST", `/v1/webhooks/${hook.id}/test`, { event_type: "message.bounced" });
    expect(asked.status).toBe(202);
    const [example] = await pull(hook.id, "?wait=5");
    expect(example).toMatchObject({ delivery_id: asked.body.delivery_id, trigger: "test" });
    expect(JSON.parse(example.body).event).toBe("message.bounced");
  }, 30_000);

  test("an account has at most 5 waiting pulls; the sixth is 429 with Retry-After", async () => {
    const hook = await createListen(["message.opened"]);
    const [test] = await pull(hook.id);
    await answer(hook.id, test.delivery_id, { status: 200, duration_ms: 1 });
    const waiting = Array.from({ length: 5 }, () => api("GET", `/v1/webhooks/${hook.id}/pending?wait=3`));
    // Wait until all five hold their place: a sixth with wait is refused, one without is not.
    const sixth = await waitUntil(
      () => api("GET", `/v1/webhooks/${hook.id}/pending?wait=3`),
      (res) => res.status === 429,
    );
    expectError(sixth, 429, "rate_limited");
    expect(sixth.headers.get("retry-after")).toBe("1");
    expect((await api("GET", `/v1/webhooks/${hook.id}/pending`)).status).toBe(200);
    // A pull that finds work waiting answers it: only waiting takes a place.
    const other = await createListen(["message.clicked"]);
    const found = await api("GET", `/v1/webhooks/${other.id}/pending?wait=3`);
    expect(found.status).toBe(200);
    expect(found.body.data.map((item: { trigger: string }) => item.trigger)).toEqual(["test"]);
    for (const res of await Promise.all(waiting)) expect(res.body.data).toEqual([]);
  }, 30_000);
});

describe("LISTEN_IDLE_HOURS=0.001 (3.6 s)", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ env: { LISTEN_IDLE_HOURS: "0.001" } });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  test("a listen webhook nobody pulls is disabled (idle) and what waited is cancelled; one pulled meanwhile is kept", async () => {
    const idle = (await stack.api("POST", "/v1/webhooks", { url: null, mode: "listen", events: ["message.sent"] })).body;
    const pulled = (await stack.api("POST", "/v1/webhooks", { url: null, mode: "listen", events: ["message.clicked"] })).body;
    const sent = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    // A replay waiting to be pulled too: its audit entry says cancelled once the webhook is disabled.
    expect((await stack.api("POST", `/v1/events/${sent.body.event_id}/replay`, {})).status).toBe(202);
    const keepPulling = setInterval(() => void stack.api("GET", `/v1/webhooks/${pulled.id}/pending?limit=1`), 500);
    try {
      const disabled = await waitUntil(
        async () => (await stack.api("GET", `/v1/webhooks/${idle.id}`)).body,
        (w) => w.status === "disabled",
      );
      expect(disabled).toMatchObject({ disabled_reason: "idle", mode: "listen" });
      expect((await stack.api("GET", `/v1/events/${sent.body.event_id}`)).body.status).toBe("failed");
      expect((await stack.api("GET", `/v1/webhooks/${pulled.id}`)).body.status).toBe("enabled");
      const audit = await waitUntil(
        async () => (await stack.api("GET", `/v1/audit-log?event_id=${sent.body.event_id}`)).body.data,
        (entries: { error: string | null }[]) => entries.length === 1 && entries[0].error !== null,
      );
      expect(audit[0]).toMatchObject({ response_status: null, error: "cancelled", destination_url: null });
    } finally {
      clearInterval(keepPulling);
    }
    // Enabled again, it gets a new 3.6 s.
    const enabled = await stack.api("PATCH", `/v1/webhooks/${idle.id}`, { status: "enabled" });
    expect(enabled.body).toMatchObject({ status: "enabled", disabled_reason: null });
  }, 30_000);
});
