// How a receiver verifies a webhook from this service, with nothing but node:crypto.
// README.md shows this file; examples/verify-webhook.test.ts runs it against real signatures.
import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Returns true when `rawBody` (the exact bytes received, before any JSON parsing) was signed
 * with `secret`. `timestamp` and `signature` are the X-Service-Timestamp and
 * X-Service-Signature headers. Rejects timestamps more than `toleranceSeconds` away from now,
 * which limits the replay of a captured request.
 */
export function verifyWebhook(secret: string, timestamp: string | undefined, signature: string | undefined, rawBody: Buffer | string, toleranceSeconds = 300): boolean {
  if (!timestamp || !signature || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) return false;
  const expected = "sha256=" + createHmac("sha256", secret).update(`${timestamp}.`).update(rawBody).digest("hex");
  const a = Buffer.from(expected);
  const b = Buffer.from(signature);
  return a.length === b.length && timingSafeEqual(a, b);
}

// Example with node:http: verify first, then parse, then de-duplicate by data.messageId
// (retries and replays deliver the same event more than once).
//
//   import http from "node:http";
//   http.createServer((req, res) => {
//     const chunks: Buffer[] = [];
//     req.on("data", (c) => chunks.push(c)).on("end", () => {
//       const body = Buffer.concat(chunks);
//       const ok = verifyWebhook(process.env.WEBHOOK_SECRET!, req.headers["x-service-timestamp"] as string,
//                                req.headers["x-service-signature"] as string, body);
//       if (!ok) return res.writeHead(401).end();
//       const { event, data } = JSON.parse(body.toString("utf8"));
//       // ... process once per (event, data.messageId) ...
//       res.writeHead(204).end();
//     });
//   }).listen(8443);
