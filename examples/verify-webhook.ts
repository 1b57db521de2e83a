// A webhook receiver with Express and @mailhooks/verify: verify the raw bytes first, then
// process each event once, keyed by its X-Service-Event-Id (retries and replays deliver the
// same event again, with the same id).
// examples/verify-webhook.test.ts runs it against requests signed by the service's own code.
//
//   WEBHOOK_SECRET=whsec_... npx tsx examples/verify-webhook.ts     (PORT defaults to 8080)
//
// During a secret rotation, give both secrets: WEBHOOK_SECRET=whsec_old,whsec_new. With
// TLS_CERT_FILE and TLS_KEY_FILE (PEM files) it serves HTTPS itself, as the README's quick start
// runs it; without them plain HTTP, for a TLS-terminating proxy in front of it.
import { readFileSync } from "node:fs";
import https from "node:https";
import express from "express";
import { pathToFileURL } from "node:url";
import { verifyWebhook, type VerifiedRequest } from "@mailhooks/verify/express";
import type { WebhookEvent } from "@mailhooks/verify";

/**
 * The receiver: POST /webhooks answers 401 (JSON error) unless the signature verifies and the
 * request has an X-Service-Event-Id, else calls `onEvent` once per event id (`webhook.id`) and
 * answers 204. `data.messageId` is no key: every event of one message shares it. `secrets` is
 * the webhook secret, or the old and the new one during a rotation. A rejected `onEvent`
 * answers 500, so the service retries the delivery.
 */
export function createReceiver(secrets: string | string[], onEvent: (webhook: WebhookEvent) => void | Promise<void>) {
  const app = express();
  // In production this is a unique key in your database, written with the event's effects.
  const processed = new Set<string>();

  // No express.json() before it: the middleware needs the body's raw bytes.
  app.post("/webhooks", verifyWebhook(secrets), async (req, res) => {
    const { webhook } = req as VerifiedRequest<express.Request>;
    if (!processed.has(webhook.id)) {
      await onEvent(webhook);
      processed.add(webhook.id);
    }
    res.sendStatus(204);
  });
  return app;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secrets = (process.env.WEBHOOK_SECRET ?? "").split(",").filter(Boolean);
  if (secrets.length === 0) throw new Error("set WEBHOOK_SECRET (comma-separated during a rotation)");
  const port = Number(process.env.PORT ?? 8080);
  const app = createReceiver(secrets, (webhook) => console.log(webhook.id, webhook.event, webhook.data.messageId ?? ""));
  const { TLS_CERT_FILE, TLS_KEY_FILE } = process.env;
  // The service delivers to https:// URLs only: HTTPS here, or plain HTTP behind a proxy that terminates TLS.
  if (TLS_CERT_FILE && TLS_KEY_FILE)
    https
      .createServer({ cert: readFileSync(TLS_CERT_FILE), key: readFileSync(TLS_KEY_FILE) }, app)
      .listen(port, () => console.log(`listening on https://localhost:${port}/webhooks`));
  else app.listen(port, () => console.log(`listening on http://localhost:${port}/webhooks`));
}
