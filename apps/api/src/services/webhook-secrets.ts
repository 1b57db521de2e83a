import { randomBytes } from "node:crypto";
import { z } from "zod";
import { rotateSecret } from "@mailhooks/delivery-state";
import type { ApiDeps } from "../deps.js";
import { notFound } from "../errors.js";
import type { RotatedSecretView } from "../schemas/webhooks.js";
import { findWebhook } from "./webhooks.js";

/** A webhook's secret: made, shown, rotated (docs/api.md, "Webhooks"). */

/** A webhook secret: 32 bytes from the CSPRNG, base64url, with a recognizable prefix. */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

/**
 * The secret of a live webhook of the account (GET /v1/webhooks/{id}/secret): the newest one,
 * which signs from `secret_activates_at` on after a rotation. Stored encrypted; decrypted here
 * only. @throws AppError not_found
 */
export async function getWebhookSecret(deps: ApiDeps, accountId: string, webhookId: string): Promise<string> {
  return deps.keyring.decrypt((await findWebhook(deps, accountId, webhookId)).secret);
}

/** The longest grace period of a rotation, in seconds (7 days). */
export const MAX_GRACE_SECONDS = 604_800;

/** The grace period of a rotation when none is given, in seconds (one day). */
export const DEFAULT_GRACE_SECONDS = 86_400;

/**
 * POST /v1/webhooks/{id}/secret/rotate. `grace_seconds` is optional, its default applied by
 * rotateWebhookSecret: a zod `.default()` would make it required in the document's schema, and
 * `{}` would not compile in a generated client (issue 20).
 */
export const rotateSecretSchema = z.strictObject({
  grace_seconds: z
    .number({ message: "must be a number of seconds" })
    .int("must be a whole number of seconds")
    .min(0, `must be from 0 to ${MAX_GRACE_SECONDS}`)
    .max(MAX_GRACE_SECONDS, `must be from 0 to ${MAX_GRACE_SECONDS}`)
    .optional()
    .meta({
      description: "seconds during which the previous secret goes on signing (default 86400, one day; 0 switches at once)",
      example: 3600,
    }),
});

/**
 * Rotates a webhook's secret (docs/api.md, "Webhooks"): a new secret signs every request from
 * `activates_at` (now + `grace_seconds`) on; until then the previous one goes on signing, so a
 * receiver can install the new one first. The wire format stays one `sha256=` signature.
 * @throws AppError not_found
 */
export async function rotateWebhookSecret(
  deps: ApiDeps,
  accountId: string,
  webhookId: string,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
): Promise<RotatedSecretView> {
  const secret = generateSecret();
  const activatesAt = await rotateSecret(deps.pool, accountId, webhookId, deps.keyring.encrypt(secret), graceSeconds);
  if (!activatesAt) throw notFound("webhook");
  return { secret, activates_at: activatesAt.toISOString() };
}
