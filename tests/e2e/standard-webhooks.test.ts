import { randomBytes } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { Webhook } from "standardwebhooks";
import { listenHttps, testCertificate, type HttpsListener } from "@mailhooks/receiver";
import { isWebhookVerificationError, verify, verifyEvent } from "@mailhooks/verify";
import { deliveryRows, expectError, expectValidation } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * Issue 35, item 3 (docs/receivers/standard-webhooks.md): `signature_scheme: "standard"` signs
 * with the Standard Webhooks headers, which the official npm `standardwebhooks` library verifies
 * on every kind of request (the test event at creation, an initial attempt, its retry, replays to
 * the webhook's URL and to an override URL, a test of a chosen kind); a caller's own `secret` at
 * creation, so the receiver is ready before the test event; both secrets sign during a rotation's
 * grace; a bad own secret is 422; `standard` is 409 for a secret made in the URL-safe alphabet
 * until it is rotated. The receiver here verifies as a receiver would: before answering, with the
 * secrets it holds, the official library for `standard` and @mailhooks/verify for `service`.
 */

/** `whsec_` and the standard base64 of `bytes` random bytes: a caller's own secret. */
const ownSecret = (bytes = 32) => `whsec_${randomBytes(bytes).toString("base64")}`;

/** Node's headers as the plain record of strings the official library takes. */
const plainHeaders = (headers: IncomingHttpHeaders): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(", ") : (value ?? "")]));

interface Arrival {
  path: string;
  headers: Record<string, string>;
  body: string;
  event: string | undefined;
  /** Whether one of the secrets the receiver held for the path verified it, under the path's scheme. */
  verified: boolean;
  status: number;
}

/** What the receiver holds for a path: the scheme it verifies and its secrets (any may match). */
interface Held {
  scheme: "service" | "standard";
  secrets: string[];
}

/** Whether `secret` verifies the request with the official library (its own clock and 5 minutes). */
function officiallyVerified(secret: string, arrival: Pick<Arrival, "headers" | "body">): boolean {
  try {
    new Webhook(secret).verify(arrival.body, arrival.headers);
    return true;
  } catch {
    return false;
  }
}

function verifiedBy(held: Held | undefined, arrival: Pick<Arrival, "headers" | "body">): boolean {
  if (!held) return false;
  if (held.scheme === "standard") return held.secrets.some((secret) => officiallyVerified(secret, arrival));
  try {
    verify(held.secrets, arrival.headers, arrival.body);
    return true;
  } catch (error) {
    if (!isWebhookVerificationError(error)) throw error;
    return false;
  }
}

describe("Standard Webhooks (signature_scheme: standard)", () => {
  let stack: Stack;
  let acct: Account;
  let listener: HttpsListener;
  const arrivals: Arrival[] = [];
  const held = new Map<string, Held>();
  /** The status answered to the nth verified email event at a path (default 200). */
  const answers = new Map<string, (nth: number) => number>();
  const counts = new Map<string, number>();

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "200,200,200" } });
    acct = await stack.newAccount();
    listener = await listenHttps(testCertificate(), (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        const path = (req.url ?? "/").split("?")[0];
        const arrival = { path, headers: plainHeaders(req.headers), body: Buffer.concat(chunks).toString("utf8") };
        const verified = verifiedBy(held.get(path.replace(/\/override$/, "")), arrival);
        let event: string | undefined;
        try {
          event = (JSON.parse(arrival.body) as { event?: string }).event;
        } catch {
          event = undefined;
        }
        let status = verified ? 200 : 401;
        if (verified && event !== "webhook.test" && !event?.startsWith("webhook.")) {
          const nth = (counts.get(path) ?? 0) + 1;
          counts.set(path, nth);
          status = answers.get(path)?.(nth) ?? 200;
        }
        arrivals.push({ ...arrival, event, verified, status });
        res.writeHead(status, { "content-type": "application/json" }).end("{}");
      });
    });
  });
  afterAll(async () => {
    await listener?.close();
    await stack?.close();
  });

  const at = (path: string) => arrivals.filter((a) => a.path === path);
  const waitForArrivals = (path: string, count: number) =>
    waitUntil(
      async () => at(path),
      (list) => list.length >= count,
    );
  const postEvent = async () => {
    const res = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(res.status).toBe(201);
    return res.body.event_id as string;
  };
  const signatures = (arrival: Arrival) => arrival.headers["webhook-signature"].split(" ");

  test("a caller's own secret: the official library verifies the test event at creation, an initial attempt, its retry, replays to the webhook's URL and to an override URL, and a test of a chosen kind", async () => {
    // Unix seconds before anything was sent: every webhook-timestamp is sent after it.
    const before = Math.floor(Date.now() / 1000);
    const secret = ownSecret();
    const path = "/own";
    // The receiver is ready before the webhook exists: the caller chose the secret.
    held.set(path, { scheme: "standard", secrets: [secret] });
    answers.set(path, (nth) => (nth === 1 ? 500 : 200));
    const created = await acct.api("POST", "/v1/webhooks", {
      url: listener.url(path),
      events: ["message.sent"],
      secret,
      signature_scheme: "standard",
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ secret, signature_scheme: "standard" });
    expect((await acct.api("GET", `/v1/webhooks/${created.body.id}`)).body.signature_scheme).toBe("standard");
    expect((await acct.api("GET", `/v1/webhooks/${created.body.id}/secret`)).body).toEqual({ secret });
    const [testEvent] = await waitForArrivals(path, 1);
    expect(testEvent).toMatchObject({ event: "webhook.test", verified: true, status: 200 });

    const eventId = await postEvent();
    // The initial attempt (answered 500) and its retry.
    await waitForArrivals(path, 3);
    expect((await acct.api("POST", `/v1/events/${eventId}/replay`)).status).toBe(202);
    await waitForArrivals(path, 4);
    expect((await acct.api("POST", `/v1/events/${eventId}/replay`, { target_url: listener.url(`${path}/override`) })).status).toBe(202);
    await waitForArrivals(`${path}/override`, 1);
    const test = await acct.api("POST", `/v1/webhooks/${created.body.id}/test`, { event_type: "message.bounced" });
    expect(test.status).toBe(202);
    await waitForArrivals(path, 5);

    const own = at(path);
    const all = [...own, ...at(`${path}/override`)];
    expect(all.map((a) => [a.event, a.verified, a.status])).toEqual([
      ["webhook.test", true, 200],
      ["message.sent", true, 500],
      ["message.sent", true, 200],
      ["message.sent", true, 200],
      ["message.bounced", true, 200],
      ["message.sent", true, 200],
    ]);
    // webhook-id is what X-Service-Event-Id carries (also sent): the event id, the test's row id.
    expect(all.map((a) => a.headers["webhook-id"])).toEqual([
      expect.stringMatching(/^dlv_/),
      eventId,
      eventId,
      eventId,
      test.body.delivery_id,
      eventId,
    ]);
    for (const arrival of all) {
      expect(arrival.headers["x-service-event-id"]).toBe(arrival.headers["webhook-id"]);
      expect(arrival.headers["x-service-timestamp"]).toBeUndefined();
      expect(arrival.headers["x-service-signature"]).toBeUndefined();
      // Unix seconds at sending: an order, which holds on any machine.
      expect(Number(arrival.headers["webhook-timestamp"])).toBeGreaterThanOrEqual(before);
      expect(Number(arrival.headers["webhook-timestamp"])).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
      expect(signatures(arrival)).toEqual([expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/)]);
      // @mailhooks/verify agrees, and gives the same id.
      expect(verifyEvent(secret, arrival.headers, arrival.body, { scheme: "standard" }).id).toBe(arrival.headers["webhook-id"]);
      // Another secret verifies nothing.
      expect(officiallyVerified(ownSecret(), arrival)).toBe(false);
    }
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.map((r) => r.trigger).sort()).toEqual(["initial", "replay", "replay", "retry"]);
  });

  test("operational events sent to a standard webhook: the official library verifies each (initial, retry and replay), about another webhook's failures", async () => {
    // An account of its own: its only operational events are the ones this test causes.
    const other = await stack.newAccount();
    const observerSecret = ownSecret();
    const observerPath = "/operations";
    held.set(observerPath, { scheme: "standard", secrets: [observerSecret] });
    // The observer refuses its first operational event once: that one is retried.
    answers.set(observerPath, (nth) => (nth === 1 ? 500 : 200));
    const observer = await other.api("POST", "/v1/webhooks", {
      url: listener.url(observerPath),
      events: ["webhook.failing", "webhook.recovered", "webhook.disabled", "destination.failed"],
      secret: observerSecret,
      signature_scheme: "standard",
    });
    expect(observer.status).toBe(201);

    const failingSecret = ownSecret();
    const failingPath = "/failing-endpoint";
    const down = { now: true };
    held.set(failingPath, { scheme: "standard", secrets: [failingSecret] });
    answers.set(failingPath, () => (down.now ? 500 : 200));
    const failing = await other.api("POST", "/v1/webhooks", {
      url: listener.url(failingPath),
      events: ["message.sent"],
      secret: failingSecret,
      signature_scheme: "standard",
    });
    expect(failing.status).toBe(201);
    const observed = (kind: string) => at(observerPath).filter((a) => a.event === kind && a.status === 200);
    const waitForObserved = (kind: string, count: number) =>
      // Each waits on up to four attempts 200 ms apart and a notice's event: a minute leaves room
      // for a machine busy with the rest of the suite.
      waitUntil(
        async () => observed(kind),
        (list) => list.length >= count,
        60_000,
      );

    // Two events fail for good (four attempts each): a destination.failed each, and webhook.failing
    // once the failed attempts in a row reach five.
    const failedEvents: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      failedEvents.push(res.body.event_id as string);
    }
    await waitForObserved("destination.failed", 2);
    await waitForObserved("webhook.failing", 1);
    // Back up: its first 2xx brings webhook.recovered; disabling it, webhook.disabled.
    down.now = false;
    await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    await waitForObserved("webhook.recovered", 1);
    expect((await other.api("PATCH", `/v1/webhooks/${failing.body.id}`, { status: "disabled" })).status).toBe(200);
    await waitForObserved("webhook.disabled", 1);

    // The first destination.failed was refused once, then retried; the observer got the rest at once.
    const refused = at(observerPath).filter((a) => a.status === 500);
    expect(refused.map((a) => a.event)).toEqual(["destination.failed"]);
    const retriedId = refused[0].headers["webhook-id"];
    // It is listed with the other; its detail is the envelope the observer received; a replay of
    // it is one more request, signed and verified the same way.
    const listed = await other.api("GET", "/v1/events?event_type=destination.failed");
    expect((listed.body.data as { event_id: string }[]).map((e) => e.event_id)).toContain(retriedId);
    expect(listed.body.data).toHaveLength(2);
    const detail = await other.api("GET", `/v1/events/${retriedId}`);
    expect(detail.body).toMatchObject({ event_type: "destination.failed", inbox_id: null, payload: { event: "destination.failed" } });
    expect(JSON.stringify(detail.body.payload)).toBe(refused[0].body);
    expect((await other.api("POST", `/v1/events/${retriedId}/replay`)).status).toBe(202);
    await waitUntil(
      async () => at(observerPath).filter((a) => a.headers["webhook-id"] === retriedId),
      (list) => list.length === 3,
    );
    const rows = await deliveryRows(other, { event_id: retriedId });
    expect(rows.map((r) => [r.trigger, r.response_status])).toEqual([
      ["initial", 500],
      ["retry", 200],
      ["replay", 200],
    ]);

    const operational = at(observerPath).filter((a) => a.event !== "webhook.test");
    const kinds = operational.map((a) => a.event);
    // destination.failed: two events, one of them retried and replayed.
    expect(kinds.filter((k) => k === "destination.failed")).toHaveLength(4);
    for (const kind of ["webhook.failing", "webhook.recovered", "webhook.disabled"])
      expect([kind, kinds.filter((k) => k === kind)]).toEqual([kind, [kind]]);
    for (const arrival of operational) {
      // Verified by the official library with the observer's secret, and by no other.
      expect([arrival.event, arrival.verified, officiallyVerified(observerSecret, arrival)]).toEqual([arrival.event, true, true]);
      expect(officiallyVerified(failingSecret, arrival)).toBe(false);
      expect(signatures(arrival)).toEqual([expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/)]);
      // webhook-id is the operational event's id (the same on its retry and its replay).
      expect(arrival.headers["webhook-id"]).toMatch(/^evt_[0-9a-f]{32}$/);
      expect(arrival.headers["x-service-event-id"]).toBe(arrival.headers["webhook-id"]);
      const envelope = JSON.parse(arrival.body) as { event: string; data: Record<string, unknown> };
      // About the failing webhook, never about the observer itself.
      expect(envelope.data.webhookId).toBe(failing.body.id);
      if (envelope.event === "destination.failed") expect(failedEvents).toContain(envelope.data.eventId);
      if (envelope.event === "webhook.disabled") expect(envelope.data.reason).toBe("manual");
    }
  });

  test("rotation with grace: both secrets sign (v1,<old> v1,<new>), so the library verifies with either; after activates_at only the newest signs", async () => {
    const first = ownSecret(24);
    const path = "/rotation";
    held.set(path, { scheme: "standard", secrets: [first] });
    const created = await acct.api("POST", "/v1/webhooks", {
      url: listener.url(path),
      events: ["message.sent"],
      secret: first,
      signature_scheme: "standard",
    });
    expect(created.status).toBe(201);
    await waitForArrivals(path, 1);
    const rotated = await acct.api("POST", `/v1/webhooks/${created.body.id}/secret/rotate`, { grace_seconds: 600 });
    expect(rotated.status).toBe(200);
    // Secrets the service makes: whsec_ and the standard base64 of 32 bytes.
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const second = rotated.body.secret as string;

    await postEvent();
    const [, duringGrace] = await waitForArrivals(path, 2);
    expect(duringGrace).toMatchObject({ verified: true, status: 200 });
    expect(signatures(duringGrace)).toHaveLength(2);
    // A receiver may switch at any moment: the old secret alone, the new one alone, both.
    expect([officiallyVerified(first, duringGrace), officiallyVerified(second, duringGrace)]).toEqual([true, true]);
    expect(verify([second], duringGrace.headers, duringGrace.body, { scheme: "standard" }).event).toBe("message.sent");

    // A rotation during the grace with grace_seconds 0: the newest signs alone, at once.
    const third = (await acct.api("POST", `/v1/webhooks/${created.body.id}/secret/rotate`, { grace_seconds: 0 })).body.secret as string;
    held.set(path, { scheme: "standard", secrets: [third] });
    await postEvent();
    const [, , after] = await waitForArrivals(path, 3);
    expect(signatures(after)).toHaveLength(1);
    expect([officiallyVerified(first, after), officiallyVerified(second, after), officiallyVerified(third, after)]).toEqual([
      false,
      false,
      true,
    ]);
  });

  test("a bad own secret (too short, too long, no prefix, not base64, URL-safe, unpadded) or scheme is 422 and stores nothing", async () => {
    const other = await stack.newAccount();
    const create = (body: Record<string, unknown>) =>
      other.api("POST", "/v1/webhooks", { url: listener.url("/never"), events: ["message.sent"], ...body });
    const urlSafe = `whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`;
    for (const secret of [
      ownSecret(23),
      ownSecret(65),
      randomBytes(32).toString("base64"),
      "whsec_not base64 at all, not even close!!",
      urlSafe,
      ownSecret(32).replace(/=+$/, ""),
      "whsec_",
      "",
      42,
      null,
    ]) {
      const res = await create({ secret, signature_scheme: "standard" });
      expectValidation(res, "secret");
    }
    expectValidation(await create({ signature_scheme: "svix" }), "signature_scheme");
    expect((await other.api("GET", "/v1/webhooks")).body.data).toEqual([]);
    // The bounds themselves are accepted.
    for (const bytes of [24, 64]) expect((await create({ secret: ownSecret(bytes) })).status).toBe(201);
  });

  test("a secret made in the URL-safe alphabet keeps signing under service; standard is 409 until it is rotated, then accepted at once (only the standard secret signs during the grace)", async () => {
    const path = "/legacy";
    const created = await acct.api("POST", "/v1/webhooks", { url: listener.url(path), events: ["message.sent"] });
    expect(created.status).toBe(201);
    expect(created.body.signature_scheme).toBe("service");
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    await waitForArrivals(path, 1);
    // A webhook made before secrets were standard base64: its secret in the URL-safe alphabet (a
    // plaintext stored value is read as it is, as for secrets stored before encryption).
    const legacy = `whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`;
    await stack.pool.query("UPDATE webhooks SET secret = $1 WHERE id = $2", [legacy, created.body.id]);
    held.set(path, { scheme: "service", secrets: [legacy] });
    await postEvent();
    const [, underService] = await waitForArrivals(path, 2);
    expect(underService).toMatchObject({ verified: true, status: 200 });

    const refused = await acct.api("PATCH", `/v1/webhooks/${created.body.id}`, { signature_scheme: "standard", rate_limit: 10 });
    expectError(refused, 409, "conflict");
    expect(refused.body.error.message).toContain("rotate");
    // Nothing of the refused PATCH applied.
    expect((await acct.api("GET", `/v1/webhooks/${created.body.id}`)).body).toMatchObject({
      signature_scheme: "service",
      rate_limit: null,
    });

    const rotated = await acct.api("POST", `/v1/webhooks/${created.body.id}/secret/rotate`, { grace_seconds: 600 });
    const fresh = rotated.body.secret as string;
    const switched = await acct.api("PATCH", `/v1/webhooks/${created.body.id}`, { signature_scheme: "standard" });
    expect(switched.status).toBe(200);
    expect(switched.body.signature_scheme).toBe("standard");
    held.set(path, { scheme: "standard", secrets: [fresh] });
    await postEvent();
    const [, , underStandard] = await waitForArrivals(path, 3);
    // The URL-safe secret, which no Standard Webhooks receiver can decode, does not sign.
    expect(underStandard).toMatchObject({ verified: true, status: 200 });
    expect(signatures(underStandard)).toHaveLength(1);

    // Back to service: during the grace the previous (URL-safe) secret signs again, as before.
    expect((await acct.api("PATCH", `/v1/webhooks/${created.body.id}`, { signature_scheme: "service" })).body.signature_scheme).toBe(
      "service",
    );
    held.set(path, { scheme: "service", secrets: [legacy] });
    await postEvent();
    const [, , , backToService] = await waitForArrivals(path, 4);
    expect(backToService).toMatchObject({ verified: true, status: 200 });
    expect(backToService.headers["webhook-signature"]).toBeUndefined();
  });

  test("another account's webhook is 404 to PATCH signature_scheme; an unknown value is 422", async () => {
    const created = await acct.api("POST", "/v1/webhooks", { url: listener.url("/other"), events: ["message.sent"] });
    const other = await stack.newAccount();
    expectError(await other.api("PATCH", `/v1/webhooks/${created.body.id}`, { signature_scheme: "standard" }), 404, "not_found");
    expectValidation(await acct.api("PATCH", `/v1/webhooks/${created.body.id}`, { signature_scheme: "Standard" }), "signature_scheme");
  });
});
