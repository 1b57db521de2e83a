import { randomBytes } from "node:crypto";
import { z } from "zod";
import { rotateSecret } from "@mailhooks/delivery-state";
import { SECRET_PREFIX, standardSecretKey } from "@mailhooks/signing";
import type { ApiDeps } from "../deps.js";
import { notFound } from "../errors.js";
import type { RotatedSecretView } from "../schemas/webhooks.js";
import { findWebhook } from "./webhooks.js";

/** A webhook's secret: made, given by the caller, shown, rotated (docs/api.md, "Webhooks"). */

/**
 * A webhook secret: 32 bytes from the CSPRNG, as `whsec_` and their standard base64 (padded), the
 * form Standard Webhooks receivers decode (docs/receivers/standard-webhooks.md). Secrets made
 * before this rule are `whsec_` and base64url: they sign under `service` only.
 */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`;
}

/** The fewest and the most bytes a caller's own secret may decode to. */
const OWN_SECRET_BYTES = { min: 24, max: 64 } as const;

/**
 * `secret` at creation (POST /v1/webhooks): a secret of the caller's own, so that a receiver can
 * be set up before the test event arrives: `whsec_` and the canonical standard base64 (A-Z a-z
 * 0-9 + /, `=` padding) of 24 to 64 bytes, the form of the secrets the service makes.
 */
export const ownSecretSchema = z
  .string({ message: "must be a string" })
  .refine((value) => value.startsWith(SECRET_PREFIX), `must start with ${SECRET_PREFIX}`)
  .refine(
    (value) => !value.startsWith(SECRET_PREFIX) || standardSecretKey(value) !== null,
    `must be ${SECRET_PREFIX} followed by standard base64 (A-Z, a-z, 0-9, + and /, padded with =)`,
  )
  .refine((value) => {
    const bytes = standardSecretKey(value)?.length;
    return bytes === undefined || (bytes >= OWN_SECRET_BYTES.min && bytes <= OWN_SECRET_BYTES.max);
  }, `must encode ${OWN_SECRET_BYTES.min} to ${OWN_SECRET_BYTES.max} bytes`)
  .meta({
    description: `a secret of your own instead of one the service makes, so that your receiver can be ready before the test event: ${SECRET_PREFIX} and the standard base64 of ${OWN_SECRET_BYTES.min} to ${OWN_SECRET_BYTES.max} random bytes`,
    example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo=",
  });

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
 * Rotates a webhook's secret (docs/api.md, "Webhooks"): a new secret (generateSecret: standard
 * base64) signs every request from `activates_at` (now + `grace_seconds`) on; until then the
 * previous one goes on signing, so a receiver can install the new one first. Under `service` a
 * request carries one `sha256=` signature, by whichever signs then; under `standard` both sign
 * during the grace (docs/receivers/standard-webhooks.md).
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
