import { readFileSync } from "node:fs";
import path from "node:path";
import { verify } from "@mailhooks/verify";
import { startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import {
  apiAs,
  at,
  createHook,
  envelopeOf,
  expectError,
  expectValidation,
  startHookReceiver,
  type HookReceiver,
} from "../support/hooks.js";

/**
 * POST /v1/inboxes/{inbox_id}/messages (docs/api.md, "Events"): the shipped sample messages go
 * through to the receiver's envelope; bounces become message.bounced; the route's errors.
 */

const SAMPLES = path.resolve(process.cwd(), "samples/mail");
const sample = (name: string) => readFileSync(path.join(SAMPLES, name));

const ID_01 = "<CAH7x9Qk2mP4wL3vR8sT1uY6zN0bE5cF@mail.example.com>";
const ID_02 = "<5f3c2a91-7d4e-4b8a-9c1f-0e6d2b7a8c34@example.com>";
const ID_03 = "<CAH7x9QnV2bK8rT5yW1qL6mZ3pX0sD4g@mail.example.com>";

/**
 * A header's value as the raw message carries it, unfolded (RFC 5322 section 2.2.3: a line break
 * followed by white space is removed), white-space runs as one space ("space-separated" in the
 * specification's table), trimmed; "" when absent. Only the top-level header section is read.
 */
function rawHeader(raw: Buffer, name: string): string {
  const head = raw.toString("utf8").split(/\r?\n\r?\n/)[0];
  const lines = head.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const colon = lines[i].indexOf(":");
    if (colon <= 0 || lines[i].slice(0, colon).toLowerCase() !== name.toLowerCase()) continue;
    let value = lines[i].slice(colon + 1);
    for (let j = i + 1; j < lines.length && /^[ \t]/.test(lines[j]); j++) value += lines[j];
    return value.replace(/\s+/g, " ").trim();
  }
  return "";
}

describe("inbound messages", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,600,900", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(() => stack.close());

  let acct: Account;
  let hr: HookReceiver;
  beforeEach(async () => {
    acct = await stack.newAccount();
    hr = await startHookReceiver(stack);
  });

  const postMessage = (inbox: string, raw: Buffer | string, contentType = "message/rfc822") =>
    acct.api("POST", `/v1/inboxes/${inbox}/messages`, raw, { "content-type": contentType });

  /** Posts `raw`, waits for its delivery at `hookPath`, returns the event and the arrival. */
  async function deliver(inbox: string, raw: Buffer, hookPath: string, secret: string) {
    const res = await postMessage(inbox, raw);
    expect(res.status).toBe(201);
    const eventId = res.body.event_id as string;
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
    );
    expect(detail.body.status).toBe("delivered");
    const body = JSON.stringify(detail.body.payload);
    const arrivals = await hr.receiver.waitFor((a) => at(a, hookPath).some((x) => x.body === body));
    const arrival = at(arrivals, hookPath).find((x) => x.body === body)!;
    expect(
      verify(secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
        now: new Date(arrival.receivedAt),
      }),
    ).toEqual(JSON.parse(arrival.body));
    return { created: res.body, detail: detail.body, arrival, envelope: envelopeOf(arrival) };
  }

  test("01, 02, 03 keep their threading headers exactly and share one threadId", async () => {
    const hook = await createHook(acct, hr, "/in/thread", ["message.received"]);
    const inbox = "inb_thread";
    const results = [];
    for (const name of ["01-welcome.eml", "02-reply.eml", "03-reply-2.eml"]) {
      const raw = sample(name);
      const r = await deliver(inbox, raw, "/in/thread", hook.secret);
      expect(r.created).toMatchObject({ event_type: "message.received", inbox_id: inbox, status: "pending" });
      expect(r.envelope.event).toBe("message.received");
      const data = r.envelope.data;
      expect(Object.keys(data)).toEqual(["messageId", "threadId", "inboxId", "from", "to", "subject", "body", "headers"]);
      expect(Object.keys(data.headers)).toEqual(["messageId", "inReplyTo", "references"]);
      expect(data.headers).toEqual({
        messageId: rawHeader(raw, "Message-ID"),
        inReplyTo: rawHeader(raw, "In-Reply-To"),
        references: rawHeader(raw, "References"),
      });
      expect(data.messageId).toBe(data.headers.messageId);
      expect(data.inboxId).toBe(inbox);
      expect(r.detail.message_id).toBe(data.messageId);
      results.push(data);
    }
    const [d1, d2, d3] = results;
    expect(d1.headers).toEqual({ messageId: ID_01, inReplyTo: "", references: "" });
    expect(d2.headers).toEqual({ messageId: ID_02, inReplyTo: ID_01, references: ID_01 });
    expect(d3.headers).toEqual({ messageId: ID_03, inReplyTo: ID_02, references: `${ID_01} ${ID_02}` });
    expect(d1).toMatchObject({
      from: "alice@example.com",
      to: ["support@inbox.example.net"],
      subject: "Welcome aboard - first steps with the new account",
    });
    expect(d2).toMatchObject({ from: "bob@example.com", to: ["support@inbox.example.net", "alice@example.com"] });
    expect(d2.body).toContain("https://hooks.example.com/mail — could you confirm");
    expect(typeof d1.threadId).toBe("string");
    expect(d1.threadId.length).toBeGreaterThan(0);
    expect(new Set([d1.threadId, d2.threadId, d3.threadId]).size).toBe(1);

    // The soft bounce 07 is about the inbox's reply to 03: same thread.
    const bounceHook = await createHook(acct, hr, "/in/thread-bounces", ["message.bounced"]);
    const b = await deliver(inbox, sample("07-bounce-soft.eml"), "/in/thread-bounces", bounceHook.secret);
    expect(b.envelope.event).toBe("message.bounced");
    expect(b.envelope.data.threadId).toBe(d1.threadId);

    // Another conversation in the same inbox is another thread.
    const other = await deliver(inbox, sample("04-multipart.eml"), "/in/thread", hook.secret);
    expect(other.envelope.data.threadId).not.toBe(d1.threadId);
    expect(other.envelope.data).toMatchObject({
      messageId: "<20261118081530.4f2a9c@mailer.example.fr>",
      from: "renee.levesque@example.fr",
      to: ["support@inbox.example.net"],
      subject: "Résumé and portfolio — Renée Lévesque",
      headers: { messageId: "<20261118081530.4f2a9c@mailer.example.fr>", inReplyTo: "", references: "" },
    });
  });

  test("a message without Message-ID gets a generated one, in data and headers alike", async () => {
    const hook = await createHook(acct, hr, "/in/no-id", ["message.received"]);
    const raw = sample("05-html-only.eml");
    expect(rawHeader(raw, "Message-ID")).toBe("");
    const first = await deliver("inb_news", raw, "/in/no-id", hook.secret);
    const data = first.envelope.data;
    expect(data.messageId).toMatch(/^<[^<>\s@]+@[^<>\s@]+>$/);
    expect(data.headers).toEqual({ messageId: data.messageId, inReplyTo: "", references: "" });
    expect(first.detail.message_id).toBe(data.messageId);
    expect(data.body).toContain("Three new articles are waiting for you.");
    // Another copy is another message: another generated id.
    const second = await deliver("inb_news", raw, "/in/no-id", hook.secret);
    expect(second.envelope.data.messageId).not.toBe(data.messageId);
  });

  test("DSNs become message.bounced, and only reach webhooks subscribed to bounces", async () => {
    const receivedOnly = await createHook(acct, hr, "/in/received-only", ["message.received"]);
    const bounces = await createHook(acct, hr, "/in/bounces", ["message.received", "message.bounced"]);
    const inbox = "inb_bounces";

    const hard = await deliver(inbox, sample("06-bounce-hard.eml"), "/in/bounces", bounces.secret);
    expect(hard.created).toMatchObject({ event_type: "message.bounced", inbox_id: inbox });
    expect(hard.envelope.event).toBe("message.bounced");
    expect(Object.keys(hard.envelope.data)).toEqual([
      "messageId",
      "threadId",
      "inboxId",
      "from",
      "to",
      "subject",
      "bounceType",
      "bounceCode",
      "bounceMessage",
      "bouncedAt",
    ]);
    expect(hard.envelope.data).toMatchObject({
      messageId: "<msg.8f41c2d07b@inbox.example.net>",
      inboxId: inbox,
      from: "support@inbox.example.net",
      to: ["nobody@example.org"],
      subject: "Your ticket #4821 has been opened",
      bounceType: "hard",
      bounceCode: "5.1.1",
      bouncedAt: "2026-11-17T14:03:20.000Z",
    });
    expect(hard.envelope.data.bounceMessage).toContain("User unknown");
    expect(hard.detail.destinations).toEqual([{ webhook_id: bounces.id, url: bounces.url, status: "delivered", attempts: 1 }]);

    const soft = await deliver(inbox, sample("07-bounce-soft.eml"), "/in/bounces", bounces.secret);
    expect(soft.envelope.data).toMatchObject({
      messageId: "<msg.c93e1a5f20@inbox.example.net>",
      to: ["bob@example.com"],
      bounceType: "soft",
      bounceCode: "4.2.2",
    });
    expect(soft.envelope.data.bounceMessage).toContain("Mailbox full");
    expect(soft.detail.destinations.map((d: { webhook_id: string }) => d.webhook_id)).toEqual([bounces.id]);

    // A received message goes to both; the received-only webhook never saw a bounce.
    const received = await deliver(inbox, sample("01-welcome.eml"), "/in/received-only", receivedOnly.secret);
    await hr.receiver.waitFor((a) => at(a, "/in/bounces").some((x) => x.body === received.arrival.body));
    expect(at(hr.receiver.arrivals, "/in/received-only", "message.bounced")).toHaveLength(0);
    expect(at(hr.receiver.arrivals, "/in/received-only", "message.received")).toHaveLength(1);
  });

  test("a wrong Content-Type is 415 unsupported_media_type", async () => {
    const raw = sample("01-welcome.eml");
    expectError(await postMessage("inb_errors", raw, "text/plain"), 415, "unsupported_media_type");
    expectError(await postMessage("inb_errors", raw, "application/json"), 415, "unsupported_media_type");
    expectError(await apiAs(stack, acct.apiKey, "POST", "/v1/inboxes/inb_errors/messages", raw), 415, "unsupported_media_type");
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(0);
  });

  test("a body that is not a message is 422 validation_error", async () => {
    expectValidation(await postMessage("inb_errors", "this is just a sentence, not an e-mail message"), "body");
    expectValidation(await postMessage("inb_errors", Buffer.from([0x00, 0x01, 0x02, 0xff, 0xfe, 0x0a, 0x0a])), "body");
    expectValidation(await postMessage("inb_errors", ""), "body");
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(0);
  });

  test("a message over 10 MiB is 413 payload_too_large", async () => {
    const head = "From: alice@example.com\r\nTo: support@inbox.example.net\r\nSubject: big\r\nMessage-ID: <big@example.com>\r\n\r\n";
    const line = `${"x".repeat(76)}\r\n`;
    const body = line.repeat(Math.ceil((10 * 1024 * 1024) / line.length) + 10);
    const raw = Buffer.from(head + body);
    expect(raw.length).toBeGreaterThan(10 * 1024 * 1024);
    expectError(await postMessage("inb_errors", raw), 413, "payload_too_large");
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(0);
  });
});
