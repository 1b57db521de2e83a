import { mkdtemp, rm } from "node:fs/promises";
import type https from "node:https";
import os from "node:os";
import path from "node:path";
import type { Got } from "got";
import { ensureLocalCertificate, GIB, listenHttps, startHostileReceiver, testCertificate, type HostileReceiver } from "@mailhooks/receiver";
import { parsePrivateTargets } from "@mailhooks/url-policy";
import { RESPONSE_BODY_LIMIT_BYTES } from "@mailhooks/delivery-state";
import { BODY_WAIT_MS, createHttpClient, statusOfHead } from "./http-client.js";
import { sendSigned, type SendInput } from "./send.js";

/**
 * sendSigned with the real client against receivers that misbehave on purpose, over real TLS on
 * loopback: whatever a receiver sends, the attempt is judged on its status line within the
 * deadline and costs bounded time and memory (docs/receivers.md; docs/api.md, "Deliveries log").
 */
const DEADLINE_MS = 2_000;
/** Scheduling slack for the timing assertions on a busy test machine, in ms. */
const SLACK_MS = 1_500;
const BODY = '{"event":"message.sent","timestamp":1795341600,"data":{"messageId":"<m1@example.com>"}}';

let receiver: HostileReceiver;
let client: Got;
let agent: https.Agent;

beforeAll(async () => {
  receiver = await startHostileReceiver(testCertificate());
  ({ client, agent } = createHttpClient({ timeoutMs: DEADLINE_MS, allowPrivateTargets: true }));
});

afterAll(async () => {
  agent.destroy();
  await receiver.close();
});

function send(url: string) {
  const input: SendInput = {
    url,
    body: BODY,
    signing: { scheme: "service", secret: "whsec_test" },
    allowPrivateTargets: true,
    eventId: "evt_0",
  };
  return sendSigned(client, input);
}

/** Resolves once `condition()` holds, polling every 10 ms; rejects after `timeoutMs`. */
async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("a receiver's answer is judged on its status line", () => {
  it("a 200 with an endless 1 GiB body is delivered at once, with the first 4096 bytes, in bounded memory", async () => {
    const before = process.memoryUsage();
    const result = await send(receiver.url("/endless/1"));
    const after = process.memoryUsage();
    expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null, responseBody: "a".repeat(RESPONSE_BODY_LIMIT_BYTES) });
    // No waiting for the rest: it is never read.
    expect(result.durationMs).toBeLessThan(BODY_WAIT_MS);
    // The socket is destroyed: the receiver sees its connection close having written a few
    // socket buffers' worth, not the gigabyte.
    await until(() => receiver.openConnections() === 0);
    expect(receiver.bodyBytesSent("/endless/1")).toBeLessThan(16 * 1024 ** 2);
    expect(receiver.bodyBytesSent("/endless/1")).toBeLessThan(GIB);
    expect(after.arrayBuffers - before.arrayBuffers).toBeLessThan(16 * 1024 ** 2);
    expect(after.rss - before.rss).toBeLessThan(64 * 1024 ** 2);
  });

  it("a complete body larger than 4096 bytes is cut at 4096 and its socket not reused", async () => {
    const result = await send(receiver.url("/big"));
    expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null });
    expect(Buffer.byteLength(result.responseBody!)).toBe(RESPONSE_BODY_LIMIT_BYTES);
    await until(() => receiver.openConnections() === 0);
  });

  it("a 200 whose body trickles one byte a second is delivered within the body wait, not timed out", async () => {
    const result = await send(receiver.url("/trickle"));
    expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null });
    // Whatever trickled in during the wait (at most a byte or two of "trickle ").
    expect("trickle ".startsWith(result.responseBody!)).toBe(true);
    expect(result.durationMs).toBeGreaterThanOrEqual(BODY_WAIT_MS - 50);
    expect(result.durationMs).toBeLessThan(BODY_WAIT_MS + SLACK_MS);
    expect(result.durationMs).toBeLessThan(DEADLINE_MS);
    await until(() => receiver.openConnections() === 0);
  });

  it("a 200 just before the deadline is delivered, its body wait cut short by the deadline", async () => {
    const result = await send(receiver.url(`/late/${DEADLINE_MS - BODY_WAIT_MS / 2}`));
    expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null });
    // The attempt ends at the deadline, not a full body wait after the status line (which
    // would be DEADLINE_MS + BODY_WAIT_MS / 2).
    expect(result.durationMs).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(result.durationMs).toBeLessThan(DEADLINE_MS + BODY_WAIT_MS / 2 - 100);
    await until(() => receiver.openConnections() === 0);
  });

  it("a small complete body leaves the keep-alive connection open for the next attempt", async () => {
    await until(() => receiver.openConnections() === 0);
    const connectionsBefore = receiver.connections();
    const first = await send(receiver.url("/ok"));
    const second = await send(receiver.url("/ok"));
    for (const result of [first, second])
      expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null, responseBody: '{"received":true}' });
    expect(receiver.connections() - connectionsBefore).toBe(1);
    expect(receiver.openConnections()).toBe(1);
  });

  it("a 500 is a failure with its status and the start of its body", async () => {
    expect(await send(receiver.url("/status/500"))).toMatchObject({
      ok: false,
      responseStatus: 500,
      error: null,
      responseBody: "answer 500: upstream exploded",
    });
  });

  it("a 302 is recorded, not followed", async () => {
    const before = receiver.requests.length;
    expect(await send(receiver.url("/redirect"))).toMatchObject({ ok: false, responseStatus: 302, error: null, responseBody: "see /ok" });
    expect(receiver.requests.slice(before)).toEqual(["/redirect"]);
  });

  it("a body that is not UTF-8 is kept with its invalid sequences replaced", async () => {
    expect(await send(receiver.url("/invalid-utf8"))).toMatchObject({
      ok: true,
      responseStatus: 200,
      responseBody: "hi\uFFFD\uFFFD\uFFFD(ok",
    });
  });
});

describe("a receiver cannot hold an attempt past the deadline", () => {
  it.each([
    ["a status line that never comes", "/silent"],
    ["headers that trickle", "/slow-headers"],
  ])("%s is a timeout at the deadline", async (_label, urlPath) => {
    const result = await send(receiver.url(urlPath));
    expect(result).toMatchObject({ ok: false, responseStatus: null, error: "timeout", responseBody: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(result.durationMs).toBeLessThan(DEADLINE_MS + SLACK_MS);
  });

  it("a TLS handshake that never completes is a timeout at the deadline", async () => {
    const before = receiver.stalledConnections();
    const result = await send(receiver.stalledHandshakeUrl("/hook"));
    expect(receiver.stalledConnections()).toBe(before + 1);
    expect(result).toMatchObject({ ok: false, responseStatus: null, error: "timeout", responseBody: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(result.durationMs).toBeLessThan(DEADLINE_MS + SLACK_MS);
  });
});

describe("headers too large to read", () => {
  it("a 2xx status line followed by a 1 MiB header is delivered, with no body, before the header is read whole", async () => {
    const result = await send(receiver.url("/huge-header/1"));
    expect(result).toMatchObject({ ok: true, responseStatus: 200, error: null, responseBody: null });
    expect(result.durationMs).toBeLessThan(DEADLINE_MS);
    await until(() => receiver.openConnections() === 0);
  });

  it("a 204 status line followed by a 1 MiB header is delivered too", async () => {
    expect(await send(receiver.url("/huge-header/204"))).toMatchObject({ ok: true, responseStatus: 204, error: null, responseBody: null });
  });

  it("a 500 status line followed by a 1 MiB header is a failure recorded with its status", async () => {
    expect(await send(receiver.url("/huge-header/500"))).toMatchObject({ ok: false, responseStatus: 500, error: null, responseBody: null });
  });

  it("the keep-alive connection still serves ordinary answers after a huge header elsewhere", async () => {
    await send(receiver.url("/huge-header/2"));
    for (let i = 0; i < 3; i++)
      expect(await send(receiver.url("/ok"))).toMatchObject({ ok: true, responseStatus: 200, responseBody: '{"received":true}' });
  });
});

describe("statusOfHead", () => {
  it.each([
    ["HTTP/1.1 200 OK\r\nX-Huge: hhhh", 200],
    ["HTTP/1.0 204 \r\n", 204],
    ["HTTP/1.1 503\r\n", 503],
    ["HTTP/1.1 302 Found", 302],
    ["HTTP/1.1 20", null],
    ["HTTP/2 200 OK\r\n", null],
    ["http/1.1 200 OK\r\n", null],
    ["HTTP/1.1 099 Low\r\n", null],
    ["", null],
  ])("%j is %p", (head, status) => {
    expect(statusOfHead(Buffer.from(head, "latin1"))).toBe(status);
  });
});

describe("ALLOW_PRIVATE_TARGETS as a list of ranges: only those, checked at connect time (issue 34 item 7)", () => {
  let received = 0;
  let listener: Awaited<ReturnType<typeof listenHttps>>;
  beforeAll(async () => {
    listener = await listenHttps(testCertificate(), (_req, res) => {
      received++;
      res.writeHead(200).end("ok");
    });
  });
  afterAll(() => listener.close());

  /** sendSigned with a client of `ranges`; the URL check passes any literal, as it does for a list in the dispatcher. */
  async function sendWith(ranges: string, url: string) {
    const { client, agent } = createHttpClient({ timeoutMs: DEADLINE_MS, allowPrivateTargets: parsePrivateTargets(ranges) });
    try {
      return await sendSigned(client, {
        url,
        body: BODY,
        signing: { scheme: "service", secret: "whsec_test" },
        allowPrivateTargets: true,
        eventId: "evt_0",
      });
    } finally {
      agent.destroy();
    }
  }
  const local = (host: string) => `https://${host}:${listener.port}/hook`;

  it("an address in a range is delivered to, by literal and by name", async () => {
    const before = received;
    expect(await sendWith("127.0.0.0/8,::1/128", local("127.0.0.1"))).toMatchObject({ ok: true, responseStatus: 200 });
    expect(await sendWith("127.0.0.0/8,::1/128", local("localhost"))).toMatchObject({ ok: true, responseStatus: 200 });
    expect(received - before).toBe(2);
  });

  it("an address outside every range is refused before connecting, by literal and by name", async () => {
    const before = received;
    for (const url of [local("127.0.0.1"), local("localhost"), local("[::1]")]) {
      expect(await sendWith("10.0.0.0/8,fd00::/8", url)).toMatchObject({ ok: false, responseStatus: null, error: "blocked_destination" });
    }
    // Loopback allowed for IPv4 only: a name with an IPv6 loopback answer is refused whole.
    expect(await sendWith("127.0.0.0/8", local("[::1]"))).toMatchObject({ ok: false, error: "blocked_destination" });
    expect(received - before).toBe(0);
  });

  it("false allows no private address; true every one", async () => {
    expect(await sendWith("false", local("localhost"))).toMatchObject({ ok: false, error: "blocked_destination" });
    expect(await sendWith("true", local("127.0.0.1"))).toMatchObject({ ok: true, responseStatus: 200 });
  });
});

describe("the connections' shared TLS context", () => {
  let untrusted: Awaited<ReturnType<typeof listenHttps>>;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "untrusted-cert-"));
    // A certificate of its own, which no root the dispatcher trusts has signed.
    untrusted = await listenHttps(await ensureLocalCertificate(dir), (_req, res) => res.writeHead(200).end("ok"));
  });
  afterAll(async () => {
    await untrusted.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("still refuses a certificate no trusted root signed (tls_error) and serves a trusted one, on fresh connections alike", async () => {
    for (let i = 0; i < 2; i++) {
      agent.destroy();
      expect(await send(untrusted.url("/hook"))).toMatchObject({ ok: false, error: "tls_error", responseStatus: null });
      expect(await send(receiver.url("/status/200"))).toMatchObject({ ok: true, responseStatus: 200 });
    }
  });
});
