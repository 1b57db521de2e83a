import { verify } from "@mailhooks/verify";
import type { Arrival, Receiver, Reply } from "@mailhooks/receiver";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * Webhook management (docs/api.md, "Webhooks"): PATCH with the create validation, secret kept and
 * no test event; disabled webhooks get no new deliveries (scheduled retries included) and
 * resume when enabled again; DELETE and the history that stays readable; account isolation.
 */

/** Retry delays: a short first one, then a long second one, to disable a webhook in between. */
const DELAYS = [300, 3000, 3000];
/** How long to keep watching for a retry that must not come, past the moment it was due. */
const ABSENCE_MS = 700;

type ApiResult = { status: number; body: any; headers: Headers };

function expectError(res: ApiResult, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(typeof res.body.error.message).toBe("string");
}

function expectValidation(res: ApiResult, path?: string): void {
  expectError(res, 422, "validation_error");
  expect(Array.isArray(res.body.error.details)).toBe(true);
  if (path !== undefined) expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
}

/** The envelope `event` of an arrival, read from the raw body (verified or not). */
const eventOf = (a: Arrival): string | undefined => {
  try {
    return JSON.parse(a.body).event;
  } catch {
    return undefined;
  }
};
const emailAt = (arrivals: Arrival[], path: string) => arrivals.filter((a) => a.path === path && eventOf(a) !== "webhook.test");
const testEventsAt = (arrivals: Arrival[], path?: string) =>
  arrivals.filter((a) => (path === undefined || a.path === path) && eventOf(a) === "webhook.test");

describe("webhooks", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: DELAYS.join(","), DELIVERY_TIMEOUT_MS: "1000" } });
  });
  afterAll(() => stack.close());

  let acct: Account;
  beforeEach(async () => {
    acct = await stack.newAccount();
  });

  /** A receiver with a secret per path; a path's secret may be taught before its webhook exists. */
  async function hookReceiver(behavior?: (a: Arrival) => Reply) {
    const secrets = new Map<string, Promise<string | undefined>>();
    const receiver: Receiver = await stack.startReceiver({
      secretFor: (p) => secrets.get(p),
      behavior: behavior ? (a) => behavior(a) : undefined,
    });
    return {
      receiver,
      teach: (path: string, secret: string) => secrets.set(path, Promise.resolve(secret)),
      /** Creates a webhook at `path`; the receiver knows its secret before the test event comes. */
      create: async (path: string, events: string[], client: Account = acct) => {
        let resolve!: (s: string | undefined) => void;
        secrets.set(path, new Promise((r) => (resolve = r)));
        const res = await client.api("POST", "/v1/webhooks", { url: receiver.url(path), events });
        resolve(res.status === 201 ? res.body.secret : undefined);
        expect(res.status).toBe(201);
        return res.body as { id: string; url: string; events: string[]; secret: string; status: string; created_at: string };
      },
    };
  }

  const postEvent = async (eventType = "message.sent", client: Account = acct) => {
    const res = await client.api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType) });
    expect(res.status).toBe(201);
    return res.body.event_id as string;
  };

  test("PATCH url, events and status answers 200 with the new values, keeps the secret and sends no test event", async () => {
    const hr = await hookReceiver();
    const hook = await hr.create("/p1", ["message.sent"]);
    await hr.receiver.waitFor((a) => testEventsAt(a, "/p1").length === 1);
    const view = (overrides: Record<string, unknown>) => ({
      id: hook.id,
      url: hook.url,
      events: ["message.sent"],
      status: "enabled",
      created_at: hook.created_at,
      ...overrides,
    });

    hr.teach("/p2", hook.secret); // the receiver expects the same secret at the new URL
    const url2 = hr.receiver.url("/p2");
    const byUrl = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { url: url2 });
    expect(byUrl.status).toBe(200);
    expect(byUrl.body).toMatchObject(view({ url: url2 }));
    expect(byUrl.body).not.toHaveProperty("secret");

    const byEvents = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { events: ["message.opened", "message.clicked"] });
    expect(byEvents.status).toBe(200);
    expect(byEvents.body).toMatchObject(view({ url: url2, events: ["message.opened", "message.clicked"] }));

    const disabled = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toMatchObject(view({ url: url2, events: ["message.opened", "message.clicked"], status: "disabled" }));

    const all = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, {
      url: url2,
      events: ["message.sent", "message.bounced"],
      status: "enabled",
    });
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject(view({ url: url2, events: ["message.sent", "message.bounced"], status: "enabled" }));
    expect(all.body).not.toHaveProperty("secret");

    const read = await acct.api("GET", `/v1/webhooks/${hook.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject(view({ url: url2, events: ["message.sent", "message.bounced"], status: "enabled" }));
    expect(read.body).not.toHaveProperty("secret");

    const secret = await acct.api("GET", `/v1/webhooks/${hook.id}/secret`);
    expect(secret.status).toBe(200);
    expect(secret.body).toEqual({ secret: hook.secret });

    // An event now goes to the new URL, signed with the unchanged secret.
    const eventId = await postEvent("message.sent");
    const arrivals = await hr.receiver.waitFor((a) => emailAt(a, "/p2").length === 1);
    const arrival = emailAt(arrivals, "/p2")[0];
    expect(arrival.verified).toBe(true);
    expect(
      verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
        now: new Date(arrival.receivedAt),
      }),
    ).toEqual(JSON.parse(arrival.body));
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: url2, status: "delivered", attempts: 1 }]);

    // No PATCH sent a test event: still the one of the creation, nothing at the new URL.
    await expect(hr.receiver.waitFor((all) => testEventsAt(all).length > 1 || emailAt(all, "/p1").length > 0, 500)).rejects.toThrow(
      TIMED_OUT,
    );
    expect(testEventsAt(hr.receiver.arrivals)).toHaveLength(1);
    expect(testEventsAt(hr.receiver.arrivals, "/p1")).toHaveLength(1);
    expect(emailAt(hr.receiver.arrivals, "/p1")).toHaveLength(0);
    const rows = await acct.api("GET", `/v1/deliveries?webhook_id=${hook.id}`);
    expect(rows.body.data.map((r: any) => r.trigger).sort()).toEqual(["initial", "test"]);
  });

  test("PATCH validates like create and changes nothing when invalid", async () => {
    const hr = await hookReceiver();
    const hook = await hr.create("/v", ["message.sent"]);
    const patch = (body: unknown) => acct.api("PATCH", `/v1/webhooks/${hook.id}`, body);

    expectValidation(await patch({ url: "http://example.com/hook" }), "url");
    expectValidation(await patch({ url: "not a url" }), "url");
    expectValidation(await patch({ url: "ftp://example.com/hook" }), "url");
    expectValidation(await patch({ url: 42 }), "url");
    expectValidation(await patch({ events: [] }), "events");
    expectValidation(await patch({ events: "message.sent" }), "events");
    const unknownEvent = await patch({ events: ["message.sent", "message.exploded"] });
    expectValidation(unknownEvent);
    expect(unknownEvent.body.error.details.some((d: { path: string }) => d.path.startsWith("events"))).toBe(true);
    expectValidation(await patch({ status: "frozen" }), "status");
    expectValidation(await patch({ status: null }), "status");
    expectValidation(await patch({ secret: "whsec_mine" }));
    expectValidation(await patch({ url: hook.url, colour: "blue" }));
    expectError(
      await acct.api("PATCH", `/v1/webhooks/${hook.id}`, '{"url": ', { "content-type": "application/json" }),
      400,
      "invalid_json",
    );

    // The same rules as create.
    expectValidation(await acct.api("POST", "/v1/webhooks", { url: "http://example.com/hook", events: ["message.sent"] }), "url");
    expectValidation(await acct.api("POST", "/v1/webhooks", { url: hook.url, events: [] }), "events");

    const read = await acct.api("GET", `/v1/webhooks/${hook.id}`);
    expect(read.body).toMatchObject({ id: hook.id, url: hook.url, events: ["message.sent"], status: "enabled" });
    expect((await acct.api("GET", `/v1/webhooks/${hook.id}/secret`)).body).toEqual({ secret: hook.secret });
  });

  test("a disabled webhook gets no destination for new events; enabling it again resumes deliveries", async () => {
    const hr = await hookReceiver();
    const a = await hr.create("/a", ["message.sent"]);
    const b = await hr.create("/b", ["message.sent"]);
    await hr.receiver.waitFor((arr) => testEventsAt(arr).length === 2);
    expect((await acct.api("PATCH", `/v1/webhooks/${a.id}`, { status: "disabled" })).body.status).toBe("disabled");

    const first = await postEvent();
    const detail1 = await waitUntil(
      () => acct.api("GET", `/v1/events/${first}`),
      (r) => r.body.status === "delivered",
    );
    expect(detail1.body.destinations).toEqual([{ webhook_id: b.id, url: b.url, status: "delivered", attempts: 1 }]);
    await hr.receiver.waitFor((arr) => emailAt(arr, "/b").length === 1);
    expect(emailAt(hr.receiver.arrivals, "/a")).toHaveLength(0);
    const aRows = await waitUntil(
      () => acct.api("GET", `/v1/deliveries?webhook_id=${a.id}`),
      (r) => r.body.data.length >= 1,
    );
    expect(aRows.body.data.map((r: any) => r.trigger)).toEqual(["test"]);

    expect((await acct.api("PATCH", `/v1/webhooks/${a.id}`, { status: "enabled" })).body.status).toBe("enabled");
    const second = await postEvent();
    const arrivals = await hr.receiver.waitFor((arr) => emailAt(arr, "/a").length === 1 && emailAt(arr, "/b").length === 2);
    expect(emailAt(arrivals, "/a")[0].verified).toBe(true);
    expect(JSON.parse(emailAt(arrivals, "/a")[0].body).data.messageId).toBe(JSON.parse(emailAt(arrivals, "/b")[1].body).data.messageId);
    const detail2 = await waitUntil(
      () => acct.api("GET", `/v1/events/${second}`),
      (r) => r.body.status === "delivered",
    );
    expect([...detail2.body.destinations].sort((x: any, y: any) => x.url.localeCompare(y.url))).toEqual([
      { webhook_id: a.id, url: a.url, status: "delivered", attempts: 1 },
      { webhook_id: b.id, url: b.url, status: "delivered", attempts: 1 },
    ]);
    // The first event stays without a destination for the webhook that was disabled then.
    expect((await acct.api("GET", `/v1/events/${first}`)).body.destinations).toHaveLength(1);
  });

  test("disabling a webhook while a retry is scheduled cancels the destination at once; the retry never comes", async () => {
    const hr = await hookReceiver((a) => (eventOf(a) === "webhook.test" ? {} : { status: 500 }));
    const hook = await hr.create("/down", ["message.sent"]);
    const eventId = await postEvent();

    // The initial attempt and retry 1 fail; retry 2 is then due DELAYS[1] ms after retry 1 ended.
    const rows = await waitUntil(
      () => acct.api("GET", `/v1/deliveries?event_id=${eventId}`),
      (r) => r.body.data.length === 2,
      10_000,
    );
    const retry1 = emailAt(hr.receiver.arrivals, "/down")[1];
    expect(retry1).toBeDefined();
    expect(rows.body.data.map((r: any) => [r.trigger, r.attempt, r.response_status])).toEqual([
      ["retry", 1, 500],
      ["initial", 0, 500],
    ]);
    const disabled = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" });
    expect(disabled.status).toBe(200);
    // The retry must not have been due yet, else this test proves nothing.
    expect(Date.now() - retry1.receivedAt).toBeLessThan(DELAYS[1] - 500);

    // docs/api.md, "Events": cancelled (the webhook was disabled before delivery), and the event
    // failed, as soon as the PATCH answered.
    const detail = await acct.api("GET", `/v1/events/${eventId}`);
    expect(detail.body.status).toBe("failed");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "cancelled", attempts: 2 }]);
    // Watch a little past the moment retry 2 was due: it is never made.
    const watchUntil = retry1.receivedAt + DELAYS[1] + ABSENCE_MS;
    await expect(hr.receiver.waitFor((all) => emailAt(all, "/down").length > 2, Math.max(1, watchUntil - Date.now()))).rejects.toThrow(
      TIMED_OUT,
    );
    expect(emailAt(hr.receiver.arrivals, "/down")).toHaveLength(2);
    const after = await acct.api("GET", `/v1/deliveries?event_id=${eventId}`);
    expect(after.body.data).toHaveLength(2);
    expect((await acct.api("GET", `/v1/events/${eventId}`)).body.destinations[0].status).toBe("cancelled");
  });

  test("DELETE answers 204; the webhook then answers 404 and is not listed, but its history stays readable", async () => {
    const hr = await hookReceiver();
    const hook = await hr.create("/d", ["message.sent"]);
    const keep = await hr.create("/keep", ["message.sent"]);
    const eventId = await postEvent();
    await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    await waitUntil(
      () => acct.api("GET", `/v1/deliveries?webhook_id=${hook.id}`),
      (r) => r.body.data.length === 2,
    );

    const deleted = await acct.api("DELETE", `/v1/webhooks/${hook.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeNull();

    expectError(await acct.api("GET", `/v1/webhooks/${hook.id}`), 404, "not_found");
    expectError(await acct.api("GET", `/v1/webhooks/${hook.id}/secret`), 404, "not_found");
    expectError(await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "enabled" }), 404, "not_found");
    expectError(await acct.api("DELETE", `/v1/webhooks/${hook.id}`), 404, "not_found");
    const listed = await acct.api("GET", "/v1/webhooks");
    expect(listed.body.data.map((w: any) => w.id)).toEqual([keep.id]);

    // History: its delivery rows and the event's destination stay.
    const rows = await acct.api("GET", `/v1/deliveries?webhook_id=${hook.id}`);
    expect(rows.status).toBe(200);
    expect(rows.body.data.map((r: any) => [r.trigger, r.event_id, r.url]).sort()).toEqual([
      ["initial", eventId, hook.url],
      ["test", null, hook.url],
    ]);
    const detail = await acct.api("GET", `/v1/events/${eventId}`);
    expect([...detail.body.destinations].sort((x: any, y: any) => x.url.localeCompare(y.url))).toEqual([
      { webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 },
      { webhook_id: keep.id, url: keep.url, status: "delivered", attempts: 1 },
    ]);

    // No new deliveries for it.
    const later = await postEvent();
    const laterDetail = await waitUntil(
      () => acct.api("GET", `/v1/events/${later}`),
      (r) => r.body.status === "delivered",
    );
    expect(laterDetail.body.destinations).toEqual([{ webhook_id: keep.id, url: keep.url, status: "delivered", attempts: 1 }]);
    await hr.receiver.waitFor((a) => emailAt(a, "/keep").length === 2);
    expect(emailAt(hr.receiver.arrivals, "/d")).toHaveLength(1);
  });

  test("another account's webhook answers 404 to GET, PATCH, DELETE and GET secret, and is left unchanged", async () => {
    const hr = await hookReceiver();
    const hook = await hr.create("/mine", ["message.sent"]);
    const other = await stack.newAccount();
    expectError(await other.api("GET", `/v1/webhooks/${hook.id}`), 404, "not_found");
    expectError(await other.api("GET", `/v1/webhooks/${hook.id}/secret`), 404, "not_found");
    expectError(
      await other.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled", url: "https://attacker.example/x" }),
      404,
      "not_found",
    );
    expectError(await other.api("DELETE", `/v1/webhooks/${hook.id}`), 404, "not_found");
    expect((await other.api("GET", "/v1/webhooks")).body).toEqual({ data: [], next_cursor: null });

    const read = await acct.api("GET", `/v1/webhooks/${hook.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: hook.id, url: hook.url, status: "enabled", events: ["message.sent"] });
    expect((await acct.api("GET", `/v1/webhooks/${hook.id}/secret`)).body).toEqual({ secret: hook.secret });

    // And an unknown id answers the same way.
    for (const [method, route] of [
      ["GET", "/v1/webhooks/wh_00000000000000000000000000000000"],
      ["GET", "/v1/webhooks/wh_00000000000000000000000000000000/secret"],
      ["DELETE", "/v1/webhooks/wh_00000000000000000000000000000000"],
    ]) {
      expectError(await acct.api(method, route), 404, "not_found");
    }
    expectError(await acct.api("PATCH", "/v1/webhooks/wh_00000000000000000000000000000000", { status: "disabled" }), 404, "not_found");
  });
});
