import type { Got } from "got";
import { verifySignature } from "@mailhooks/signing";
import { classifyError, sendSigned, type SendInput } from "./send.js";

interface PostCall {
  url: string;
  options: { body: string; headers: Record<string, string> };
}

/** A stand-in for got: records each post and answers `respond()`'s result. */
function fakeClient(respond: () => Promise<{ statusCode: number }>): { client: Got; calls: PostCall[] } {
  const calls: PostCall[] = [];
  const client = {
    post: (url: string, options: PostCall["options"]) => {
      calls.push({ url, options });
      return respond();
    },
  };
  return { client: client as unknown as Got, calls };
}

/** A client that fails the test if any request is attempted. */
const noRequestClient = {
  post: () => {
    throw new Error("must not be called");
  },
} as unknown as Got;

const BODY = '{"event":"message.sent","timestamp":1795341600,"data":{"messageId":"<m1@example.com>"}}';

function input(url: string, allowPrivateTargets = false): SendInput {
  return { url, body: BODY, secret: "whsec_test", allowPrivateTargets };
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
    expect(classifyError(Object.assign(new Error("wrapped"), { code: "ERR_GOT_REQUEST_ERROR", cause: errorWithCode(code) }))).toBe(expected);
  });

  it("maps got's TimeoutError by name", () => {
    const error = new Error("Timeout awaiting 'request' for 30000ms");
    error.name = "TimeoutError";
    expect(classifyError(error)).toBe("timeout");
  });
});

describe("sendSigned", () => {
  it.each(["http://example.com/hook", "ftp://example.com/hook", "not a url"])("refuses %p as insecure_url without a request", async (url) => {
    expect(await sendSigned(noRequestClient, input(url))).toEqual({ ok: false, responseStatus: null, error: "insecure_url", durationMs: 0 });
  });

  it.each(["https://127.0.0.1/hook", "https://[::1]:8443/hook", "https://169.254.169.254/latest", "https://[::ffff:10.0.0.1]/"])(
    "refuses the non-public IP literal %p without a request",
    async (url) => {
      const result = await sendSigned(noRequestClient, input(url));
      expect(result).toMatchObject({ ok: false, responseStatus: null, error: "blocked_destination" });
    },
  );

  it("with ALLOW_PRIVATE_TARGETS, posts the exact body signed over its own timestamp", async () => {
    const { client, calls } = fakeClient(async () => ({ statusCode: 204 }));
    const result = await sendSigned(client, input("https://127.0.0.1:8443/hook", true));
    expect(result).toMatchObject({ ok: true, responseStatus: 204, error: null });
    expect(calls).toHaveLength(1);
    const { url, options } = calls[0];
    expect(url).toBe("https://127.0.0.1:8443/hook");
    expect(options.body).toBe(BODY);
    expect(options.headers["content-type"]).toBe("application/json");
    const timestamp = options.headers["X-Service-Timestamp"];
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(5);
    const signature = options.headers["X-Service-Signature"];
    expect(verifySignature({ secret: "whsec_test", timestamp, signature, body: BODY })).toBe(true);
  });

  it("reports a 3xx as a failure with its status and no error", async () => {
    const { client } = fakeClient(async () => ({ statusCode: 302 }));
    expect(await sendSigned(client, input("https://example.com/hook"))).toMatchObject({ ok: false, responseStatus: 302, error: null });
  });

  it("turns a thrown request error into its code", async () => {
    const { client } = fakeClient(async () => {
      throw errorWithCode("ENOTFOUND");
    });
    expect(await sendSigned(client, input("https://example.invalid/hook"))).toMatchObject({ ok: false, responseStatus: null, error: "dns_error" });
  });
});
