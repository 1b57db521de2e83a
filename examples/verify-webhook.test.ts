import { readFileSync } from "node:fs";
import { signPayload } from "@mailhooks/signing";
import { verifyWebhook } from "./verify-webhook.js";

const secret = "whsec_example";
const body = '{"event":"message.sent","timestamp":1700000000,"data":{"messageId":"<a@b>"}}';

describe("the receiver example of the README", () => {
  test("accepts what the dispatcher signs", () => {
    const ts = String(Math.floor(Date.now() / 1000));
    expect(verifyWebhook(secret, ts, signPayload(secret, ts, body), body)).toBe(true);
    expect(verifyWebhook(secret, ts, signPayload(secret, ts, body), Buffer.from(body))).toBe(true);
  });

  test("rejects a changed body, timestamp or secret, and a stale timestamp", () => {
    const ts = String(Math.floor(Date.now() / 1000));
    const sig = signPayload(secret, ts, body);
    expect(verifyWebhook(secret, ts, sig, body.replace("sent", "Sent"))).toBe(false);
    expect(verifyWebhook(secret, String(Number(ts) + 1), sig, body)).toBe(false);
    expect(verifyWebhook("whsec_other", ts, sig, body)).toBe(false);
    const old = String(Number(ts) - 3600);
    expect(verifyWebhook(secret, old, signPayload(secret, old, body), body)).toBe(false);
    expect(verifyWebhook(secret, undefined, sig, body)).toBe(false);
  });

  test("the README shows this very code", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const source = readFileSync(new URL("./verify-webhook.ts", import.meta.url), "utf8");
    const fn = source.slice(source.indexOf("export function verifyWebhook"), source.indexOf("\n}\n") + 2);
    expect(readme).toContain(fn);
  });
});
