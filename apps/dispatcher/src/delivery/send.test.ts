import type { Got } from "got";
import { listenHttps, testCertificate } from "@mailhooks/receiver";
import { verify } from "@mailhooks/verify";
import { Webhook } from "standardwebhooks";
import { createHttpClient } from "./http-client.js";
import { decodeExcerpt } from "@mailhooks/delivery-state";
import { classifyError, sendSigned, type SendInput } from "./send.js";

interface Received {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/** A real HTTPS receiver on loopback that records each request and answers `status`. */
async function recordingReceiver(
  status: number,
): Promise<{ url: (p: string) => string; received: Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  const listener = await listenHttps(testCertificate(), (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ url: req.url ?? "", body: Buffer.concat(chunks).toString("utf8"), headers: req.headers as Record<string, string> });
      res.writeHead(status).end();
    });
  });
  return { url: (p) => `https://127.0.0.1:${listener.port}${p}`, received, close: listener.close };
}

/** A client that fails the test if any request is attempted. */
const noRequestClient = {
  post: () => {
    throw new Error("must not be called");
  },
  stream: {
    post: () => {
      throw new Error("must not be called");
    },
  },
} as unknown as Got;

const BODY = '{"event":"message.sent","timestamp":1795341600,"data":{"messageId":"<m1@example.com>"}}';

function input(url: string, allowPrivateTargets = false): SendInput {
  return { url, body: BODY, signing: { scheme: "service", secret: "whsec_test" }, allowPrivateTargets, eventId: "evt_0" };
}

function errorWithCode(code: string): Error {
  return Object.assign(new Error(code), { code });
}

describe("classifyError", () => {
  it.each([
    ["ETIMEDOUT", "timeout"],
    ["ECONNREFUSED", "connection_error"],
    ["ECONNRESET", "connection_error"],
    ["ENOTFOUND", "dns_error"],
    ["EAI_AGAIN", "dns_error"],
    ["DEPTH_ZERO_SELF_SIGNED_CERT", "tls_error"],
    ["ERR_TLS_CERT_ALTNAME_INVALID", "tls_error"],
    ["CERT_HAS_EXPIRED", "tls_error"],
    ["EBLOCKEDDESTINATION", "blocked_destination"],
  ])("%s -> %s", (code, expected) => {
    expect(classifyError(errorWithCode(code))).toBe(expected);
    // got wraps the socket's error: the original code may only be on `cause`.
    expect(classifyError(Object.assign(new Error("wrapped"), { code: "ERR_GOT_REQUEST_ERROR", cause: errorWithCode(code) }))).toBe(
      expected,
    );
  });

  it("maps got's TimeoutError by name", () => {
    const error = new Error("Timeout awaiting 'request' for 30000ms");
    error.name = "TimeoutError";
    expect(classifyError(error)).toBe("timeout");
  });
});

describe("sendSigned", () => {
  it.each(["http://example.com/hook", "ftp://example.com/hook", "not a url"])(
    "refuses %p as insecure_url without a request",
    async (url) => {
      expect(await sendSigned(noRequestClient, input(url))).toEqual({
        ok: false,
        responseStatus: null,
        error: "insecure_url",
        responseBody: null,
        durationMs: 0,
      });
    },
  );

  it.each(["https://127.0.0.1/hook", "https://[::1]:8443/hook", "https://169.254.169.254/latest", "https://[::ffff:10.0.0.1]/"])(
    "refuses the non-public IP literal %p without a request",
    async (url) => {
      const result = await sendSigned(noRequestClient, input(url));
      expect(result).toMatchObject({ ok: false, responseStatus: null, error: "blocked_destination" });
    },
  );

  it("with ALLOW_PRIVATE_TARGETS, posts the exact body signed over its own timestamp", async () => {
    const receiver = await recordingReceiver(204);
    const { client, agent } = createHttpClient({ timeoutMs: 5_000, allowPrivateTargets: true });
    try {
      const result = await sendSigned(client, input(receiver.url("/hook"), true));
      expect(result).toMatchObject({ ok: true, responseStatus: 204, error: null, responseBody: "" });
      expect(receiver.received).toHaveLength(1);
      const { url, body, headers } = receiver.received[0];
      expect(url).toBe("/hook");
      expect(body).toBe(BODY);
      expect(headers["content-type"]).toBe("application/json");
      const timestamp = headers["x-service-timestamp"];
      expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(5);
      expect(headers["x-service-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
      // What a receiver does: @mailhooks/verify on the headers and bytes received.
      expect(verify("whsec_test", headers, body)).toEqual(JSON.parse(BODY));
    } finally {
      agent.destroy();
      await receiver.close();
    }
  });

  it("sends X-Service-Event-Id and the webhook's own headers; the service's own headers win over a same-named one; a Buffer body is sent as is", async () => {
    const receiver = await recordingReceiver(200);
    const { client, agent } = createHttpClient({ timeoutMs: 5_000, allowPrivateTargets: true });
    try {
      const own = { authorization: "Bearer gateway-token", "x-tenant": "t1", "content-type": "text/plain" };
      const result = await sendSigned(client, {
        ...input(receiver.url("/hook"), true),
        body: Buffer.from(BODY),
        eventId: "evt_0123",
        headers: own,
      });
      expect(result.ok).toBe(true);
      const { body, headers } = receiver.received[0];
      expect(body).toBe(BODY);
      expect([headers["x-service-event-id"], headers.authorization, headers["x-tenant"], headers["content-type"]]).toEqual([
        "evt_0123",
        "Bearer gateway-token",
        "t1",
        "application/json",
      ]);
      expect(verify("whsec_test", headers, body)).toEqual(JSON.parse(BODY));
    } finally {
      agent.destroy();
      await receiver.close();
    }
  });

  it("a body over BODY_SLICE_BYTES (written in slices) arrives whole, with its Content-Length and a valid signature", async () => {
    const receiver = await recordingReceiver(200);
    const { client, agent } = createHttpClient({ timeoutMs: 5_000, allowPrivateTargets: true });
    try {
      const big = JSON.stringify({ event: "message.received", timestamp: 1795341600, data: { body: "é line\n".repeat(40_000) } });
      const result = await sendSigned(client, { ...input(receiver.url("/hook"), true), body: Buffer.from(big) });
      expect(result.ok).toBe(true);
      const { body, headers } = receiver.received[0];
      expect([body === big, headers["content-length"], headers["transfer-encoding"]]).toEqual([
        true,
        String(Buffer.byteLength(big)),
        undefined,
      ]);
      expect(verify("whsec_test", headers, body)).toEqual(JSON.parse(big));
    } finally {
      agent.destroy();
      await receiver.close();
    }
  });

  it("under standard: webhook-id, webhook-timestamp and one v1 signature per secret, which the official library verifies; no X-Service-Timestamp/Signature", async () => {
    const receiver = await recordingReceiver(200);
    const { client, agent } = createHttpClient({ timeoutMs: 5_000, allowPrivateTargets: true });
    const previous = `whsec_${Buffer.alloc(32, 1).toString("base64")}`;
    const current = `whsec_${Buffer.alloc(48, 2).toString("base64")}`;
    try {
      const result = await sendSigned(client, {
        ...input(receiver.url("/hook"), true),
        signing: { scheme: "standard", secrets: [previous, current] },
        eventId: "evt_0123",
        // A same-named header of the webhook's own loses to the service's.
        headers: { "webhook-signature": "v1,forged", "x-tenant": "t1" },
      });
      expect(result.ok).toBe(true);
      const { body, headers } = receiver.received[0];
      expect(body).toBe(BODY);
      expect([headers["x-service-event-id"], headers["webhook-id"], headers["x-tenant"]]).toEqual(["evt_0123", "evt_0123", "t1"]);
      expect(headers["x-service-timestamp"]).toBeUndefined();
      expect(headers["x-service-signature"]).toBeUndefined();
      expect(Math.abs(Number(headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(5);
      expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
      for (const secret of [previous, current]) expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(BODY));
    } finally {
      agent.destroy();
      await receiver.close();
    }
  });

  it("without ALLOW_PRIVATE_TARGETS, refuses a host name that resolves to loopback at connect time", async () => {
    const receiver = await recordingReceiver(200);
    const { client, agent } = createHttpClient({ timeoutMs: 5_000, allowPrivateTargets: false });
    try {
      // `localhost` passes the URL check (not an IP literal); the lookup refuses its address.
      const result = await sendSigned(client, input(receiver.url("/hook").replace("127.0.0.1", "localhost")));
      expect(result).toMatchObject({ ok: false, responseStatus: null, error: "blocked_destination", responseBody: null });
      expect(receiver.received).toHaveLength(0);
    } finally {
      agent.destroy();
      await receiver.close();
    }
  });

  it("turns a DNS failure into dns_error", async () => {
    const { client, agent } = createHttpClient({ timeoutMs: 5_000, allowPrivateTargets: true });
    try {
      expect(await sendSigned(client, input("https://example.invalid/hook", true))).toMatchObject({
        ok: false,
        responseStatus: null,
        error: "dns_error",
        responseBody: null,
      });
    } finally {
      agent.destroy();
    }
  });
});

describe("decodeExcerpt", () => {
  it("replaces invalid UTF-8 sequences", () => {
    expect(decodeExcerpt(Buffer.from([0x6f, 0xff, 0x6b]), false)).toBe("o\uFFFDk");
  });

  it("drops a character cut by the byte limit rather than replacing it", () => {
    const bytes = Buffer.from("né", "utf8"); // é is two bytes
    expect(decodeExcerpt(bytes.subarray(0, 2), true)).toBe("n");
    // A body that really ends there is invalid at its end.
    expect(decodeExcerpt(bytes.subarray(0, 2), false)).toBe("n\uFFFD");
  });

  it("keeps a byte order mark and replaces NUL, which PostgreSQL text cannot hold", () => {
    expect(decodeExcerpt(Buffer.from("\uFEFFa\u0000b", "utf8"), false)).toBe("\uFEFFa\uFFFDb");
  });
});
