import type { Receiver, Reply, Arrival } from "@mailhooks/receiver";
import { backdateEvent } from "../support/backdate.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * The lists (docs/api.md, "Conventions"; docs/api.md, "Events"; docs/api.md, "Deliveries log"): GET /v1/events with each filter alone and combined,
 * exact `since`/`until` bounds on created_at, validation of the query, keyset pagination while
 * events keep arriving, account isolation; GET /v1/audit-log; GET /v1/webhooks.
 */

type ApiResult = { status: number; body: any; headers: Headers };

/** A 422 validation_error in the error shape whose details name `path`. */
function expectValidation(res: ApiResult, path: string): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 422, code: "validation_error" });
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(typeof res.body.error.message).toBe("string");
  expect(Array.isArray(res.body.error.details)).toBe(true);
  for (const d of res.body.error.details) expect(Object.keys(d).sort()).toEqual(["message", "path"]);
  expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
}

/** Every item of a list, following next_cursor; also returns the pages' sizes. */
async function walk(acct: Pick<Account, "api">, route: string, query: Record<string, string>): Promise<{ items: any[]; pages: number[] }> {
  const items: any[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 200; i++) {
    const params = new URLSearchParams({ ...query, ...(cursor ? { cursor } : {}) });
    const res = await acct.api("GET", `${route}?${params}`);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["data", "next_cursor"]);
    items.push(...res.body.data);
    pages.push(res.body.data.length);
    cursor = res.body.next_cursor;
    if (cursor === null) return { items, pages };
    expect(typeof cursor).toBe("string");
  }
  throw new Error("pagination did not end");
}

const EVENT_KEYS = ["created_at", "event_id", "event_type", "inbox_id", "message_id", "occurred_at", "payload_retained", "status"];

describe("lists", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "50,50,50", DELIVERY_TIMEOUT_MS: "4000" } });
  });
  afterAll(() => stack.close());

  /** A receiver that verifies with per-path secrets (promises, so the test event verifies too). */
  async function receiverWith(
    behavior?: (arrival: Arrival) => Reply,
  ): Promise<{ receiver: Receiver; hook: (acct: Account, path: string, events: string[]) => Promise<any> }> {
    const secrets = new Map<string, Promise<string | undefined>>();
    const receiver = await stack.startReceiver({ secretFor: (p) => secrets.get(p), behavior: behavior ? (a) => behavior(a) : undefined });
    const hook = async (acct: Account, path: string, events: string[]) => {
      let resolve!: (s: string | undefined) => void;
      secrets.set(path, new Promise((r) => (resolve = r)));
      const res = await acct.api("POST", "/v1/webhooks", { url: receiver.url(path), events });
      resolve(res.status === 201 ? res.body.secret : undefined);
      expect(res.status).toBe(201);
      return res.body;
    };
    return { receiver, hook };
  }

  async function postEvent(
    acct: Account,
    eventType: string,
    overrides: Record<string, unknown> = {},
  ): Promise<{ id: string; messageId: string; body: any }> {
    const data = sampleData(eventType, overrides);
    const res = await acct.api("POST", "/v1/events", { event_type: eventType, data });
    expect(res.status).toBe(201);
    return { id: res.body.event_id, messageId: data.messageId as string, body: res.body };
  }

  const setCreatedAt = (acct: Account, eventId: string, at: Date) => backdateEvent(stack.pool, eventId, at, acct.accountId);

  describe("GET /v1/events", () => {
    interface Modelled {
      id: string;
      type: string;
      inbox: string;
      at: number;
      messageId: string;
      status?: string;
    }
    let acct: Account;
    let model: Modelled[];
    let base: number;
    const iso = (ms: number) => new Date(ms).toISOString();

    /** The model's events passing `query`, newest first. */
    /** `since`/`until` as epoch ms (sent in UTC) or as an ISO string sent as is. */
    type Query = { inbox_id?: string; event_type?: string; status?: string; since?: number | string; until?: number | string };
    const ms = (v: number | string) => (typeof v === "number" ? v : Date.parse(v));
    const expected = (q: Query) =>
      model
        .filter(
          (e) =>
            (q.inbox_id === undefined || e.inbox === q.inbox_id) &&
            (q.event_type === undefined || e.type === q.event_type) &&
            (q.status === undefined || e.status === q.status) &&
            (q.since === undefined || e.at >= ms(q.since)) &&
            (q.until === undefined || e.at < ms(q.until)),
        )
        .sort((a, b) => b.at - a.at)
        .map((e) => e.id);

    const list = async (query: Query) => {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, typeof v === "number" ? iso(v) : v);
      params.set("limit", "100");
      const res = await acct.api("GET", `/v1/events?${params}`);
      expect(res.status).toBe(200);
      expect(res.body.next_cursor).toBeNull();
      return res.body.data as any[];
    };
    const ids = async (query: Query) => (await list(query)).map((e) => e.event_id);

    beforeAll(async () => {
      acct = await stack.newAccount();
      // message.bounced fails at /fail; message.clicked is answered slowly at /slow (stays pending a while).
      const { receiver, hook } = await receiverWith((a) => {
        if (a.event === "webhook.test") return {};
        if (a.path === "/fail") return { status: 500 };
        if (a.path === "/slow") return { delayMs: 1500 };
        return {};
      });
      await hook(acct, "/fail", ["message.bounced"]);
      await hook(acct, "/slow", ["message.clicked"]);
      await receiver.waitFor((arr) => arr.filter((x) => x.event === "webhook.test").length === 2);

      base = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
      const plan: [string, string, number][] = [
        ["message.sent", "inbox_a", 0],
        ["message.delivered", "inbox_a", 1000],
        ["message.sent", "inbox_b", 2000],
        ["message.opened", "inbox_b", 3000],
        ["message.sent", "inbox_a", 4000],
        ["message.bounced", "inbox_b", 5000],
        ["message.sent", "inbox_a", 5001],
        ["message.clicked", "inbox_a", 6000],
      ];
      model = [];
      // No delivery starts before every event is backdated: the order a loaded machine produced
      // (an event moved before its destination was read) is the one this test always takes.
      await stack.stopDispatcher();
      for (const [type, inbox, offset] of plan) {
        const ev = await postEvent(acct, type, { inboxId: inbox });
        expect(ev.body.inbox_id).toBe(inbox);
        model.push({ id: ev.id, type, inbox, at: base + offset, messageId: ev.messageId });
      }
      for (const e of model) await setCreatedAt(acct, e.id, new Date(e.at));
      stack.startDispatcher();
    });

    test("status filter: pending while a destination is in flight, failed after a failure, delivered otherwise", async () => {
      const clicked = model.find((e) => e.type === "message.clicked")!;
      const bounced = model.find((e) => e.type === "message.bounced")!;
      // The slow receiver holds the message.clicked delivery for 1.5 s.
      expect(await ids({ status: "pending" })).toContain(clicked.id);
      await waitUntil(
        () => acct.api("GET", `/v1/events/${bounced.id}`),
        (r) => r.body.status === "failed",
      );
      expect(await ids({ status: "failed" })).toEqual([bounced.id]);
      await waitUntil(
        () => acct.api("GET", `/v1/events/${clicked.id}`),
        (r) => r.body.status === "delivered",
      );
      expect(await ids({ status: "pending" })).toEqual([]);
      for (const e of model) e.status = e === bounced ? "failed" : "delivered";
      expect(await ids({ status: "delivered" })).toEqual(expected({ status: "delivered" }));
      expect(await ids({ status: "failed" })).toEqual([bounced.id]);
    });

    test("items carry exactly the contract's fields, newest first by created_at, exact to the millisecond", async () => {
      const all = await list({});
      expect(all.map((e) => e.event_id)).toEqual(expected({}));
      for (const item of all) {
        const m = model.find((e) => e.id === item.event_id)!;
        expect(Object.keys(item).sort()).toEqual(EVENT_KEYS);
        expect(item).toEqual({
          event_id: m.id,
          event_type: m.type,
          inbox_id: m.inbox,
          message_id: m.messageId,
          status: m.status,
          occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          created_at: iso(m.at),
          payload_retained: true,
        });
      }
    });

    test("each filter alone", async () => {
      for (const q of <Query[]>[
        { inbox_id: "inbox_a" },
        { inbox_id: "inbox_b" },
        { inbox_id: "inbox_none" },
        { event_type: "message.sent" },
        { event_type: "message.bounced" },
        { event_type: "message.received" },
        { status: "failed" },
        { status: "delivered" },
        { status: "pending" },
      ]) {
        expect({ q, ids: await ids(q) }).toEqual({ q, ids: expected(q) });
      }
      // Sanity of the model itself, so that the comparisons above are not vacuous.
      expect(expected({ inbox_id: "inbox_a" })).toHaveLength(5);
      expect(expected({ event_type: "message.sent" })).toHaveLength(4);
    });

    test("since is inclusive and until exclusive on created_at, to the millisecond", async () => {
      const at5000 = model.find((e) => e.at === base + 5000)!.id;
      const at5001 = model.find((e) => e.at === base + 5001)!.id;
      const since5001 = await ids({ since: base + 5001 });
      expect(since5001).toContain(at5001);
      expect(since5001).not.toContain(at5000);
      const until5001 = await ids({ until: base + 5001 });
      expect(until5001).not.toContain(at5001);
      expect(until5001).toContain(at5000);
      for (const q of <Query[]>[
        { since: base + 5001 },
        { since: base + 5000 },
        { since: base + 5002 },
        { since: base },
        { until: base + 5001 },
        { until: base + 5000 },
        { until: base },
        { until: base + 1 },
        { since: base + 1000, until: base + 5001 },
        { since: base + 5000, until: base + 5001 },
        { since: base + 5001, until: base + 5001 },
        { since: base + 6000, until: base + 1000 },
      ]) {
        expect({ q, ids: await ids(q) }).toEqual({ q, ids: expected(q) });
      }
      expect(expected({ since: base + 5000, until: base + 5001 })).toEqual([at5000]);
      // Another offset, same instant.
      const plusTwo = new Date(base + 5001 + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
      expect(await ids({ since: plusTwo })).toEqual(expected({ since: base + 5001 }));
    });

    test("filters combined", async () => {
      for (const q of <Query[]>[
        { inbox_id: "inbox_a", event_type: "message.sent" },
        { inbox_id: "inbox_b", status: "failed" },
        { inbox_id: "inbox_a", status: "failed" },
        { event_type: "message.sent", status: "delivered" },
        { event_type: "message.sent", since: base + 2000, until: base + 5001 },
        { inbox_id: "inbox_b", since: base + 2000 },
        { inbox_id: "inbox_a", event_type: "message.sent", status: "delivered", since: base + 1, until: base + 6000 },
      ]) {
        const got = await ids(q);
        expect({ q, ids: got }).toEqual({ q, ids: expected(q) });
      }
      expect(
        expected({ inbox_id: "inbox_a", event_type: "message.sent", status: "delivered", since: base + 1, until: base + 6000 }),
      ).toHaveLength(2);
      // A filter and pagination together.
      const paged = await walk(acct, "/v1/events", { event_type: "message.sent", limit: "3" });
      expect(paged.items.map((e) => e.event_id)).toEqual(expected({ event_type: "message.sent" }));
      expect(paged.pages).toEqual([3, 1]);
    });

    test("invalid filters answer 422 naming the parameter", async () => {
      const bogusCursor = Buffer.from("hello world", "utf8").toString("base64url");
      const cases: [string, string][] = [
        ["event_type=message.exploded", "query.event_type"],
        ["event_type=", "query.event_type"],
        ["since=yesterday", "query.since"],
        ["since=2026-13-01T00:00:00Z", "query.since"],
        ["until=not-a-date", "query.until"],
        ["status=paused", "query.status"],
        ["limit=0", "query.limit"],
        ["limit=101", "query.limit"],
        ["limit=abc", "query.limit"],
        ["limit=1.5", "query.limit"],
        ["cursor=%21%21%21", "query.cursor"],
        [`cursor=${bogusCursor}`, "query.cursor"],
      ];
      for (const [query, path] of cases) {
        const res = await acct.api("GET", `/v1/events?${query}`);
        try {
          expectValidation(res, path);
        } catch (error) {
          throw new Error(`GET /v1/events?${query}: ${JSON.stringify(res.body)}\n${(error as Error).message}`);
        }
      }
      // The bounds of limit are accepted.
      expect((await acct.api("GET", "/v1/events?limit=1")).status).toBe(200);
      expect((await acct.api("GET", "/v1/events?limit=100")).status).toBe(200);
    });

    test("another account sees none of these events", async () => {
      const other = await stack.newAccount();
      expect((await other.api("GET", "/v1/events")).body).toEqual({ data: [], next_cursor: null });
      expect((await other.api("GET", "/v1/events?inbox_id=inbox_a&event_type=message.sent")).body).toEqual({ data: [], next_cursor: null });
      expect((await other.api("GET", "/v1/events?status=failed")).body).toEqual({ data: [], next_cursor: null });
      const foreign = await other.api("GET", `/v1/events/${model[0].id}`);
      expect([foreign.status, foreign.body.error.code]).toEqual([404, "not_found"]);
    });
  });

  test("an unknown query parameter answers 422 naming it", async () => {
    const acct = await stack.newAccount();
    for (const [route, path] of [
      ["/v1/events?inbox_id=inbox_a&colour=blue", "query.colour"],
      ["/v1/events?offset=10", "query.offset"],
      ["/v1/audit-log?replay_id=rpl_1", "query.replay_id"],
      ["/v1/webhooks?status=enabled", "query.status"],
    ]) {
      const res = await acct.api("GET", route);
      try {
        expectValidation(res, path);
      } catch (error) {
        throw new Error(`GET ${route}: ${JSON.stringify(res.body)}\n${(error as Error).message}`);
      }
    }
  });

  test("the test event of a webhook's creation is not listed", async () => {
    const acct = await stack.newAccount();
    const { receiver, hook } = await receiverWith();
    const created = await hook(acct, "/t", ["message.sent"]);
    await receiver.waitFor((arr) => arr.some((a) => a.path === "/t" && a.event === "webhook.test"));
    const rows = await waitUntil(
      () => acct.api("GET", `/v1/deliveries?webhook_id=${created.id}`),
      (r) => r.body.data.length === 1,
    );
    expect(rows.body.data[0]).toMatchObject({ trigger: "test", event_id: null });
    expect((await acct.api("GET", "/v1/events")).body).toEqual({ data: [], next_cursor: null });
    const ev = await postEvent(acct, "message.sent");
    expect((await acct.api("GET", "/v1/events")).body.data.map((e: any) => e.event_id)).toEqual([ev.id]);
  });

  test("keyset pagination visits each event exactly once while new events keep arriving", async () => {
    const acct = await stack.newAccount();
    const originals: string[] = [];
    for (let i = 0; i < 25; i++) originals.push((await postEvent(acct, i % 2 ? "message.opened" : "message.sent")).id);
    // Groups of three share one created_at, so that pages split ties (ordered by id).
    const base = Date.now() - 600_000;
    for (let i = 0; i < originals.length; i++) await setCreatedAt(acct, originals[i], new Date(base + Math.floor(i / 3)));

    const before = await acct.api("GET", "/v1/events?limit=100");
    const order: string[] = before.body.data.map((e: any) => e.event_id);
    expect([...order].sort()).toEqual([...originals].sort());
    const times = before.body.data.map((e: any) => Date.parse(e.created_at));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeLessThanOrEqual(times[i - 1]);

    const visited: string[] = [];
    const added: string[] = [];
    const pages: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 20; page++) {
      const res = await acct.api("GET", `/v1/events?limit=4${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      visited.push(...res.body.data.map((e: any) => e.event_id));
      pages.push(res.body.data.length);
      cursor = res.body.next_cursor;
      if (cursor === null) break;
      for (let k = 0; k < 2; k++) added.push((await postEvent(acct, "message.sent")).id);
    }
    expect(cursor).toBeNull();
    expect(pages).toEqual([4, 4, 4, 4, 4, 4, 1]);
    expect(new Set(visited).size).toBe(visited.length);
    expect(visited).toEqual(order);
    expect(added).toHaveLength(12);
    // The new events are there, first, for a walk that starts now.
    const fresh = await walk(acct, "/v1/events", { limit: "10" });
    const freshIds = fresh.items.map((e) => e.event_id);
    expect(freshIds.slice(0, 12).sort()).toEqual([...added].sort());
    expect(freshIds.slice(12)).toEqual(order);
    expect(fresh.pages).toEqual([10, 10, 10, 7]);
  });

  test("GET /v1/audit-log: event_id, since/until on replayed_at, pagination, account isolation", async () => {
    const acct = await stack.newAccount();
    const { receiver, hook } = await receiverWith();
    const webhook = await hook(acct, "/audit", ["message.sent"]);
    const x = await postEvent(acct, "message.sent");
    const y = await postEvent(acct, "message.sent");
    for (const e of [x, y])
      await waitUntil(
        () => acct.api("GET", `/v1/events/${e.id}`),
        (r) => r.body.status === "delivered",
      );

    const entries: any[] = [];
    for (const e of [x, y, x]) {
      const replay = await acct.api("POST", `/v1/events/${e.id}/replay`);
      expect(replay.status).toBe(202);
      const listed = await waitUntil(
        () => acct.api("GET", "/v1/audit-log"),
        (r) => r.body.data.length === entries.length + 1,
      );
      entries.unshift(listed.body.data[0]);
      expect(listed.body.data[0].event_id).toBe(e.id);
    }
    await receiver.waitFor((arr) => arr.filter((a) => a.path === "/audit" && a.event === "message.sent").length === 5);
    const [x2, y1, x1] = entries; // newest first
    for (const entry of entries) {
      expect(entry).toEqual({
        id: expect.stringMatching(/^aud_/),
        event_id: expect.any(String),
        replayed_at: expect.any(String),
        destination_url: webhook.url,
        response_status: 200,
        error: null,
        api_key_id: acct.apiKeyId,
      });
    }
    const t = entries.map((e) => Date.parse(e.replayed_at));
    expect(t[0]).toBeGreaterThan(t[1]);
    expect(t[1]).toBeGreaterThan(t[2]);

    const idsOf = async (query: string) => {
      const res = await acct.api("GET", `/v1/audit-log?${query}`);
      expect(res.status).toBe(200);
      return res.body.data.map((e: any) => e.id);
    };
    expect(await idsOf("")).toEqual([x2.id, y1.id, x1.id]);
    expect(await idsOf(`event_id=${x.id}`)).toEqual([x2.id, x1.id]);
    expect(await idsOf(`event_id=${y.id}`)).toEqual([y1.id]);
    expect(await idsOf("event_id=evt_00000000000000000000000000000000")).toEqual([]);
    const enc = encodeURIComponent;
    expect(await idsOf(`since=${enc(y1.replayed_at)}`)).toEqual([x2.id, y1.id]);
    expect(await idsOf(`until=${enc(y1.replayed_at)}`)).toEqual([x1.id]);
    expect(await idsOf(`since=${enc(x1.replayed_at)}&until=${enc(x2.replayed_at)}`)).toEqual([y1.id, x1.id]);
    expect(await idsOf(`since=${enc(y1.replayed_at)}&until=${enc(y1.replayed_at)}`)).toEqual([]);
    expect(await idsOf(`event_id=${x.id}&since=${enc(y1.replayed_at)}`)).toEqual([x2.id]);

    const paged = await walk(acct, "/v1/audit-log", { limit: "1" });
    expect(paged.items.map((e) => e.id)).toEqual([x2.id, y1.id, x1.id]);
    expect(paged.pages).toEqual([1, 1, 1]);
    const pagedX = await walk(acct, "/v1/audit-log", { event_id: x.id, limit: "1" });
    expect(pagedX.items.map((e) => e.id)).toEqual([x2.id, x1.id]);

    const other = await stack.newAccount();
    expect((await other.api("GET", "/v1/audit-log")).body).toEqual({ data: [], next_cursor: null });
    expect((await other.api("GET", `/v1/audit-log?event_id=${x.id}`)).body).toEqual({ data: [], next_cursor: null });

    expectValidation(await acct.api("GET", "/v1/audit-log?since=yesterday"), "query.since");
    expectValidation(await acct.api("GET", "/v1/audit-log?until=soon"), "query.until");
    expectValidation(await acct.api("GET", "/v1/audit-log?limit=0"), "query.limit");
    expectValidation(await acct.api("GET", "/v1/audit-log?limit=101"), "query.limit");
    expectValidation(await acct.api("GET", "/v1/audit-log?cursor=%25%25"), "query.cursor");
  });

  test("GET /v1/webhooks: live webhooks newest first, paginated, never a secret", async () => {
    const acct = await stack.newAccount();
    const receiver = await stack.startReceiver({ secretFor: () => undefined });
    const created: any[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await acct.api("POST", "/v1/webhooks", { url: receiver.url(`/w${i}`), events: ["message.sent"] });
      expect(res.status).toBe(201);
      created.push(res.body);
    }
    const [w0, w1, w2, w3, w4] = created;
    // A disabled webhook is still listed; a deleted one is not.
    expect((await acct.api("PATCH", `/v1/webhooks/${w1.id}`, { status: "disabled" })).status).toBe(200);
    expect((await acct.api("DELETE", `/v1/webhooks/${w2.id}`)).status).toBe(204);

    const all = await acct.api("GET", "/v1/webhooks");
    expect(all.status).toBe(200);
    expect(all.body.next_cursor).toBeNull();
    expect(all.body.data.map((w: any) => w.id)).toEqual([w4.id, w3.id, w1.id, w0.id]);
    for (const item of all.body.data) {
      expect(item).not.toHaveProperty("secret");
      expect(JSON.stringify(item)).not.toContain("whsec_");
      const original = created.find((c) => c.id === item.id);
      expect(item).toMatchObject({ id: original.id, url: original.url, events: ["message.sent"], created_at: original.created_at });
      expect(item.status).toBe(item.id === w1.id ? "disabled" : "enabled");
    }
    const times = all.body.data.map((w: any) => Date.parse(w.created_at));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeLessThanOrEqual(times[i - 1]);

    const paged = await walk(acct, "/v1/webhooks", { limit: "2" });
    expect(paged.items.map((w) => w.id)).toEqual([w4.id, w3.id, w1.id, w0.id]);
    expect(paged.pages).toEqual([2, 2]);
    for (const item of paged.items) expect(item).not.toHaveProperty("secret");
    const single = await acct.api("GET", `/v1/webhooks/${w0.id}`);
    expect(single.status).toBe(200);
    expect(single.body).not.toHaveProperty("secret");

    const other = await stack.newAccount();
    expect((await other.api("GET", "/v1/webhooks")).body).toEqual({ data: [], next_cursor: null });

    expectValidation(await acct.api("GET", "/v1/webhooks?limit=0"), "query.limit");
    expectValidation(await acct.api("GET", "/v1/webhooks?limit=101"), "query.limit");
    expectValidation(await acct.api("GET", "/v1/webhooks?cursor=nope"), "query.cursor");
  });
});
