import { createHash } from "node:crypto";
import fs from "node:fs";
import { eventDataSchemas } from "@mailhooks/events";
import { deriveThreadId, parseRawMessage, UnparseableMessageError, type ParsedInbound, type ParsedReceived } from "./parse-message.js";

const INBOX = "inb_support";
const NOW = new Date("2026-12-01T08:00:00.000Z");

const ID_01 = "<CAH7x9Qk2mP4wL3vR8sT1uY6zN0bE5cF@mail.example.com>";
const ID_02 = "<5f3c2a91-7d4e-4b8a-9c1f-0e6d2b7a8c34@example.com>";
const ID_03 = "<CAH7x9QnV2bK8rT5yW1qL6mZ3pX0sD4g@mail.example.com>";

function sample(name: string): Buffer {
  return fs.readFileSync(new URL(`../../../../samples/mail/${name}`, import.meta.url));
}

function parseSample(name: string): Promise<ParsedInbound> {
  return parseRawMessage(sample(name), INBOX, NOW);
}

/** Narrows to a received message (whose data has headers and body); throws on a bounce. */
function asReceived(parsed: ParsedInbound): ParsedReceived {
  if (parsed.eventType !== "message.received") throw new Error(`expected message.received, got ${parsed.eventType}`);
  return parsed;
}

/** Builds an LF-terminated message from lines; CRLF is not needed by the parser. */
function message(lines: string[]): Buffer {
  return Buffer.from(lines.join("\n"), "utf8");
}

/** The data as it would be published: with the thread id added, checked by the event schema. */
function expectValidEvent(parsed: ParsedInbound): void {
  const data = { ...parsed.data, threadId: deriveThreadId(INBOX, parsed.threadRootId) };
  const result = eventDataSchemas[parsed.eventType].safeParse(data);
  expect(result.error?.issues ?? []).toEqual([]);
}

describe("parseRawMessage: received messages", () => {
  test("01: header values and addresses as the message carries them", async () => {
    const parsed = await parseSample("01-welcome.eml");
    expect(parsed.eventType).toBe("message.received");
    expect(parsed.data).toEqual({
      messageId: ID_01,
      inboxId: INBOX,
      from: "alice@example.com",
      to: ["support@inbox.example.net"], // Cc is not a To recipient
      subject: "Welcome aboard - first steps with the new account",
      body: "Hi support team,\n\nWe just signed up and would like to set up webhooks for our inbox.\nBob (in Cc) will be the technical contact.\n\nThanks,\nAlice\n",
      headers: { messageId: ID_01, inReplyTo: "", references: "" },
    });
    expect(parsed.referencedIds).toEqual([]);
    expect(parsed.threadRootId).toBe(ID_01);
  });

  test("02: References folded onto its own line is unfolded", async () => {
    expect(sample("02-reply.eml").toString()).toContain(`References:\n ${ID_01}\n`);
    const parsed = asReceived(await parseSample("02-reply.eml"));
    expect(parsed.data.messageId).toBe(ID_02);
    expect(parsed.data.headers).toEqual({ messageId: ID_02, inReplyTo: ID_01, references: ID_01 });
    expect(parsed.data.to).toEqual(["support@inbox.example.net", "alice@example.com"]);
    expect(parsed.data.body).toContain("https://hooks.example.com/mail — could you confirm");
    expect(parsed.referencedIds).toEqual([ID_01]);
  });

  test("03: References folded over two lines becomes single-spaced", async () => {
    expect(sample("03-reply-2.eml").toString()).toContain(`References: ${ID_01}\n\t${ID_02}\n`);
    const parsed = asReceived(await parseSample("03-reply-2.eml"));
    expect(parsed.data.headers).toEqual({
      messageId: ID_03,
      inReplyTo: ID_02,
      references: `${ID_01} ${ID_02}`,
    });
    expect(parsed.referencedIds).toEqual([ID_02, ID_01]);
  });

  test("CRLF line endings give the same result as LF", async () => {
    const crlf = Buffer.from(sample("03-reply-2.eml").toString("utf8").replace(/\n/g, "\r\n"), "utf8");
    const [lf, withCrlf] = await Promise.all([parseSample("03-reply-2.eml"), parseRawMessage(crlf, INBOX, NOW)]);
    // mailparser normalises the text body's line breaks to LF, so even the body is equal.
    expect(withCrlf.data).toEqual(lf.data);
  });

  test("raw values keep comments and brackets; whitespace runs collapse to one space", async () => {
    const parsed = asReceived(
      await parseRawMessage(
        message([
          "From: Carol <carol@example.com>",
          "To: support@inbox.example.net",
          "Subject: odd headers",
          "Message-ID:   <odd.1@example.com>  ",
          "In-Reply-To: <parent@example.com>   (Alice's message of",
          "    Mon, 16 Nov 2026 09:12:03 +0000)",
          "References: <root@example.com>\t\t<parent@example.com>",
          "",
          "text",
        ]),
        INBOX,
        NOW,
      ),
    );
    expect(parsed.data.headers).toEqual({
      messageId: "<odd.1@example.com>",
      inReplyTo: "<parent@example.com> (Alice's message of Mon, 16 Nov 2026 09:12:03 +0000)",
      references: "<root@example.com> <parent@example.com>",
    });
    expect(parsed.referencedIds).toEqual(["<parent@example.com>", "<root@example.com>"]);
    expect(parsed.threadRootId).toBe("<root@example.com>");
  });

  test("thread root falls back to In-Reply-To when there is no References", async () => {
    const parsed = await parseRawMessage(
      message(["From: a@example.com", "To: b@example.com", "Message-ID: <c@x>", "In-Reply-To: <p@x>", "", "hi"]),
      INBOX,
      NOW,
    );
    expect(parsed.threadRootId).toBe("<p@x>");
  });

  test("To groups are flattened, display names dropped", async () => {
    const parsed = await parseRawMessage(
      message([
        'From: "Dee, D." <Dee.D@Example.com>',
        "To: Team: one@example.com, Two <two@example.com>;, three@example.com",
        "Message-ID: <g@x>",
        "",
        "hi",
      ]),
      INBOX,
      NOW,
    );
    expect(parsed.data.from).toBe("Dee.D@Example.com");
    expect(parsed.data.to).toEqual(["one@example.com", "two@example.com", "three@example.com"]);
    expect(parsed.data.subject).toBe("");
  });

  test("04: encoded-word subject is decoded, text part chosen over HTML and attachment", async () => {
    const parsed = asReceived(await parseSample("04-multipart.eml"));
    expect(parsed.eventType).toBe("message.received");
    expect(parsed.data.subject).toBe("Résumé and portfolio — Renée Lévesque");
    expect(parsed.data.from).toBe("renee.levesque@example.fr");
    expect(parsed.data.body).toBe(
      "Bonjour,\n\nPlease find my résumé attached. I am applying for the support engineer role — café chats welcome.\n\nRenée",
    );
    expect(parsed.data.headers).toEqual({
      messageId: "<20261118081530.4f2a9c@mailer.example.fr>",
      inReplyTo: "",
      references: "",
    });
  });

  test("05: HTML-only message without Message-ID gets a generated one and a text body", async () => {
    const parsed = asReceived(await parseSample("05-html-only.eml"));
    const headers = parsed.data.headers;
    expect(parsed.data.messageId).toMatch(/^<[0-9a-f-]{36}@mailhooks\.invalid>$/);
    expect(headers).toEqual({ messageId: parsed.data.messageId, inReplyTo: "", references: "" });
    expect(parsed.threadRootId).toBe(parsed.data.messageId);
    expect(parsed.data.body).toContain("Three new articles are waiting for you.");
    expect(parsed.data.body).not.toContain("<p>");
    const again = await parseSample("05-html-only.eml");
    expect(again.data.messageId).not.toBe(parsed.data.messageId);
  });

  test("HTML-only part nested in multipart/mixed still yields a text body", async () => {
    const parsed = asReceived(
      await parseRawMessage(
        message([
          "From: a@example.com",
          "To: b@example.com",
          "Message-ID: <nested@x>",
          "MIME-Version: 1.0",
          'Content-Type: multipart/mixed; boundary="b1"',
          "",
          "--b1",
          "Content-Type: text/html; charset=utf-8",
          "",
          "<p>Hello <b>there</b></p>",
          "--b1",
          "Content-Type: application/pdf; name=a.pdf",
          "Content-Disposition: attachment; filename=a.pdf",
          "Content-Transfer-Encoding: base64",
          "",
          "JVBERi0xLjQK",
          "--b1--",
        ]),
        INBOX,
        NOW,
      ),
    );
    expect(parsed.data.body).toBe("Hello there");
  });
});

describe("threads", () => {
  test("01, 02 and 03 share the thread root and the thread id", async () => {
    const [a, b, c] = await Promise.all(["01-welcome.eml", "02-reply.eml", "03-reply-2.eml"].map(parseSample));
    expect([a.threadRootId, b.threadRootId, c.threadRootId]).toEqual([ID_01, ID_01, ID_01]);
    const ids = [a, b, c].map((p) => deriveThreadId(INBOX, p.threadRootId));
    expect(new Set(ids).size).toBe(1);
    const other = await parseSample("04-multipart.eml");
    expect(deriveThreadId(INBOX, other.threadRootId)).not.toBe(ids[0]);
  });

  test("deriveThreadId is thr_ + 24 hex digits of sha256(inbox \\n root)", () => {
    const expected = createHash("sha256").update(`${INBOX}\n${ID_01}`).digest("hex").slice(0, 24);
    expect(deriveThreadId(INBOX, ID_01)).toBe(`thr_${expected}`);
    expect(deriveThreadId(INBOX, ID_01)).toMatch(/^thr_[0-9a-f]{24}$/);
    expect(deriveThreadId("inb_other", ID_01)).not.toBe(deriveThreadId(INBOX, ID_01));
  });
});

describe("parseRawMessage: delivery status notifications", () => {
  test("06: Postfix hard bounce with text/rfc822-headers", async () => {
    const parsed = await parseSample("06-bounce-hard.eml");
    expect(parsed.eventType).toBe("message.bounced");
    expect(parsed.data).toEqual({
      messageId: "<msg.8f41c2d07b@inbox.example.net>",
      inboxId: INBOX,
      from: "support@inbox.example.net",
      to: ["nobody@example.org"],
      subject: "Your ticket #4821 has been opened",
      bounceType: "hard",
      bounceCode: "5.1.1",
      bounceMessage: "550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown",
      bouncedAt: "2026-11-17T14:03:20.000Z",
    });
    expect(parsed.referencedIds).toEqual(["<msg.8f41c2d07b@inbox.example.net>"]);
    expect(parsed.threadRootId).toBe("<msg.8f41c2d07b@inbox.example.net>");
  });

  test("07: delayed (4.2.2) with message/rfc822 is a soft bounce in the 01 thread", async () => {
    const parsed = await parseSample("07-bounce-soft.eml");
    expect(parsed.eventType).toBe("message.bounced");
    expect(parsed.data).toEqual({
      messageId: "<msg.c93e1a5f20@inbox.example.net>",
      inboxId: INBOX,
      from: "support@inbox.example.net",
      to: ["bob@example.com"],
      subject: "Re: Welcome aboard - first steps with the new account",
      bounceType: "soft",
      bounceCode: "4.2.2",
      bounceMessage: "452 4.2.2 <bob@example.com>: Mailbox full",
      bouncedAt: "2026-11-18T06:40:11.000Z",
    });
    expect(parsed.referencedIds).toEqual(["<msg.c93e1a5f20@inbox.example.net>", ID_03, ID_01, ID_02]);
    expect(parsed.threadRootId).toBe(ID_01);
  });

  /** A minimal DSN; `status` lines are the delivery-status part, `original` the third part. */
  function dsn(opts: { date?: string; status: string[]; original?: string[] }): Buffer {
    return message([
      "From: MAILER-DAEMON@mx.example.net",
      "To: support@inbox.example.net",
      ...(opts.date ? [`Date: ${opts.date}`] : []),
      "Subject: Undeliverable",
      "Message-ID: <dsn.1@mx.example.net>",
      "MIME-Version: 1.0",
      'Content-Type: multipart/report; report-type="delivery-status"; boundary="r1"',
      "",
      "--r1",
      "Content-Type: text/plain; charset=us-ascii",
      "",
      "  Delivery to the following recipients failed permanently:",
      "",
      "      x@example.org",
      "",
      "--r1",
      "Content-Type: message/delivery-status",
      "",
      ...opts.status,
      ...(opts.original ? ["", "--r1", "Content-Type: text/rfc822-headers", "", ...opts.original] : []),
      "",
      "--r1--",
    ]);
  }

  test("missing fields fall back: report's own id, Date header, human-readable text", async () => {
    const raw = dsn({
      date: "Fri, 20 Nov 2026 10:00:00 +0100",
      status: [
        "Reporting-MTA: dns; mx.example.net",
        "",
        "Final-Recipient: rfc822; ok@example.org",
        "Action: delivered",
        "Status: 2.0.0",
        "",
        "Final-Recipient: rfc822;x@example.org",
        "Action: Failed",
        "Status: 5.2.1 (mailbox disabled)",
        "",
        "Final-Recipient: RFC822; y@example.org",
        "Action: failed",
        "Status: 5.1.1",
      ],
    });
    const parsed = await parseRawMessage(raw, INBOX, NOW);
    expect(parsed.data).toEqual({
      messageId: "<dsn.1@mx.example.net>",
      inboxId: INBOX,
      from: "",
      to: ["x@example.org", "y@example.org"],
      subject: "",
      bounceType: "hard",
      bounceCode: "5.2.1",
      bounceMessage: "Delivery to the following recipients failed permanently:\n\n      x@example.org",
      bouncedAt: "2026-11-20T09:00:00.000Z",
    });
    expect(parsed.referencedIds).toEqual([]);
    expect(parsed.threadRootId).toBe("<dsn.1@mx.example.net>");
    expectValidEvent(parsed);
  });

  test("no Arrival-Date and no Date: bouncedAt is now; headers-only original with a reply", async () => {
    // Also without the per-message block (Reporting-MTA), which some MTAs leave out.
    const raw = dsn({
      status: ["Final-Recipient: rfc822; x@example.org", "Action: failed", "Status: 5.7.1", "Diagnostic-Code: smtp;  554 5.7.1 Rejected"],
      original: [
        "From: support@inbox.example.net",
        "Subject: =?UTF-8?B?w4ljaG8=?=",
        "Message-ID: <orig@inbox.example.net>",
        "In-Reply-To: <prev@example.org>",
      ],
    });
    const parsed = await parseRawMessage(raw, INBOX, NOW);
    expect(parsed.data).toMatchObject({
      messageId: "<orig@inbox.example.net>",
      from: "support@inbox.example.net",
      subject: "Écho",
      bounceMessage: "554 5.7.1 Rejected",
      bouncedAt: NOW.toISOString(),
    });
    expect(parsed.referencedIds).toEqual(["<orig@inbox.example.net>", "<prev@example.org>"]);
    expect(parsed.threadRootId).toBe("<prev@example.org>");
  });

  test("a report without failed or 4.x.x delayed recipients is a received message", async () => {
    const raw = dsn({
      date: "Fri, 20 Nov 2026 10:00:00 +0000",
      status: ["Final-Recipient: rfc822; ok@example.org", "Action: delivered", "Status: 2.0.0"],
    });
    const parsed = await parseRawMessage(raw, INBOX, NOW);
    expect(parsed.eventType).toBe("message.received");
    expect(parsed.data.messageId).toBe("<dsn.1@mx.example.net>");
    expectValidEvent(parsed);
  });
});

/** Deterministic pseudo-random bytes: truly random ones could form a header line by chance. */
function noise(length: number): Buffer {
  const blocks: Buffer[] = [];
  for (let i = 0; blocks.length * 32 < length; i++) blocks.push(createHash("sha256").update(`noise ${i}`).digest());
  return Buffer.concat(blocks).subarray(0, length);
}

describe("parseRawMessage: unparseable input", () => {
  test.each([
    ["empty input", Buffer.alloc(0)],
    ["blank lines only", Buffer.from("\r\n\r\n")],
    ["prose without header fields", Buffer.from("hello world, this is not an e-mail\nsecond line\n")],
    ["prose with a colon", Buffer.from("Dear team: hello\n\nbody")],
    ["binary noise", noise(512)],
  ])("%s throws UnparseableMessageError", async (_name, raw) => {
    await expect(parseRawMessage(raw, INBOX, NOW)).rejects.toBeInstanceOf(UnparseableMessageError);
  });

  test("the error says why", async () => {
    await expect(parseRawMessage(Buffer.alloc(0), INBOX, NOW)).rejects.toThrow("empty message");
  });
});

describe("every sample validates against its event schema", () => {
  const samples = fs
    .readdirSync(new URL("../../../../samples/mail/", import.meta.url))
    .filter((name) => name.endsWith(".eml"))
    .sort();

  test("there are the seven samples", () => {
    expect(samples).toHaveLength(7);
  });

  test.each(samples)("%s", async (name) => {
    expectValidEvent(await parseSample(name));
  });
});
