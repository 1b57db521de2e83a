import type { Webhook } from "@mailhooks/db";
import {
  changeWebhook,
  deleteWebhook as deleteWebhookState,
  IdempotencyConflictError,
  IdempotentWebhookDeletedError,
  registerWebhook,
  type WebhookRow,
} from "@mailhooks/delivery-state";
import type { Keyring } from "@mailhooks/secrets";
import { isStandardSecret } from "@mailhooks/signing";
import type { ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import { keysetPage, type Page, type PageRequest } from "../http/pagination.js";
import type { WebhookView, WebhookWithSecretView } from "../schemas/webhooks.js";
import { decryptHeaders, encryptHeaders, maskedHeaders } from "./webhook-options.js";
import { assertDeliverableUrl, type CreateWebhookInput, type UpdateWebhookInput } from "./webhook-input.js";
import { generateSecret } from "./webhook-secrets.js";

/**
 * Webhook registration (spec "Webhook registration"; docs/api.md, "Webhooks"). The request
 * bodies' schemas and the URL checks are in webhook-input.ts.
 */

export type { WebhookView };

/** `secret_activates_at` of a view: only a pending rotation is shown. */
const pendingActivation = (at: Date | null) => (at && at.getTime() > Date.now() ? at.toISOString() : null);

type WebhookRecord = Pick<
  Webhook,
  | "id"
  | "url"
  | "events"
  | "status"
  | "disabledReason"
  | "secretActivatesAt"
  | "rateLimit"
  | "inboxIds"
  | "headers"
  | "signatureScheme"
  | "mode"
  | "lastPulledAt"
  | "createdAt"
  | "updatedAt"
>;

/**
 * The webhook object of the answers. Its headers' values are decrypted only to be masked: the
 * view holds their names. @throws SecretDecryptionError (no key of the keyring opens the headers)
 */
export function toWebhookView(w: WebhookRecord, keyring: Keyring): WebhookView {
  return {
    id: w.id,
    url: w.url,
    mode: w.mode === "listen" ? "listen" : "push",
    events: w.events as WebhookView["events"],
    status: w.status,
    disabled_reason: w.status === "disabled" ? (w.disabledReason ?? "manual") : null,
    secret_activates_at: pendingActivation(w.secretActivatesAt),
    rate_limit: w.rateLimit ?? null,
    // The API never stores an empty list: an empty (or NULL, however read) list is "every inbox".
    inbox_ids: w.inboxIds && w.inboxIds.length > 0 ? w.inboxIds : null,
    headers: maskedHeaders(keyring, w.headers ?? null),
    signature_scheme: w.signatureScheme === "standard" ? "standard" : "service",
    last_pulled_at: w.lastPulledAt?.toISOString() ?? null,
    created_at: w.createdAt.toISOString(),
    updated_at: w.updatedAt.toISOString(),
  };
}

/** The view of a row written by @mailhooks/delivery-state. */
function rowView(w: WebhookRow, keyring: Keyring): WebhookView {
  return toWebhookView(
    {
      id: w.id,
      url: w.url,
      events: w.events,
      status: w.status,
      disabledReason: w.disabled_reason,
      secretActivatesAt: w.secret_activates_at,
      rateLimit: w.rate_limit,
      inboxIds: w.inbox_ids ?? [],
      headers: w.headers,
      signatureScheme: w.signature_scheme,
      mode: w.mode,
      lastPulledAt: w.last_pulled_at,
      createdAt: w.created_at,
      updatedAt: w.updated_at,
    },
    keyring,
  );
}

/** An Idempotency-Key and the hash of the request body it came with. */
export interface WebhookIdempotency {
  key: string;
  requestHash: string;
}

/**
 * Registers a webhook with its test event: both committed in one transaction (with the test
 * delivery's work queue row), so the answer that shows the secret follows a webhook that will get
 * its test event, whatever Redis is doing. With an Idempotency-Key used within 24 h with the same
 * body, answers the first webhook (its current secret included) and sends no test event
 * (`created: false`). Extra headers are stored encrypted (webhook-options.ts). The secret is the
 * caller's own when given (ownSecretSchema has checked its form), else one made here.
 * @throws AppError validation_error (blocked address), conflict (MAX_WEBHOOKS_PER_ACCOUNT
 *   reached; the Idempotency-Key came with another body, or its webhook was deleted since)
 */
export async function createWebhook(
  deps: ApiDeps,
  accountId: string,
  input: CreateWebhookInput,
  idempotency?: WebhookIdempotency,
): Promise<{ webhook: WebhookWithSecretView; created: boolean }> {
  if (input.url !== null) assertDeliverableUrl(deps, input.url, "url");
  const secret = input.secret ?? generateSecret();
  let registered;
  try {
    registered = await registerWebhook(deps.pool, {
      accountId,
      queuePrefix: deps.config.QUEUE_PREFIX,
      url: input.url,
      mode: input.mode ?? "push",
      events: input.events,
      secret: deps.keyring.encrypt(secret),
      maxWebhooks: deps.config.MAX_WEBHOOKS_PER_ACCOUNT,
      rateLimit: input.rate_limit ?? null,
      inboxIds: input.inbox_ids ?? null,
      headers: encryptHeaders(deps.keyring, input.headers ?? {}),
      signatureScheme: input.signature_scheme ?? "service",
      ...(idempotency ? { idempotency } : {}),
    });
  } catch (error) {
    if (error instanceof IdempotencyConflictError) throw new AppError("conflict", "idempotency_key_reused", error.message);
    if (error instanceof IdempotentWebhookDeletedError) throw new AppError("conflict", "idempotent_webhook_deleted", error.message);
    throw error;
  }
  if (!registered) {
    throw new AppError(
      "conflict",
      "webhook_limit_reached",
      `the account already has the maximum of ${deps.config.MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one first`,
    );
  }
  const view = rowView(registered.webhook, deps.keyring);
  if (registered.repeated) return { webhook: { ...view, secret: deps.keyring.decrypt(registered.webhook.secret) }, created: false };
  return { webhook: { ...view, secret }, created: true };
}

/** A live (not deleted) webhook of the account. @throws AppError not_found */
export async function findWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<Webhook> {
  const webhook = await deps.prisma.webhook.findFirst({ where: { id: webhookId, accountId, deletedAt: null } });
  if (!webhook) throw notFound("webhook");
  return webhook;
}

/** The account's live webhooks, newest first; never their secrets. */
export async function listWebhooks(deps: ApiDeps, accountId: string, page: PageRequest): Promise<Page<WebhookView>> {
  const where = { accountId, deletedAt: null };
  const toView = (w: Webhook) => toWebhookView(w, deps.keyring);
  return keysetPage("createdAt", page, where, (query) => deps.prisma.webhook.findMany(query), toView);
}

/**
 * Refuses `signature_scheme: "standard"` for a webhook whose newest secret is not `whsec_` and
 * standard base64 (one made before that rule, in the URL-safe alphabet): it could sign nothing a
 * Standard Webhooks receiver can check. A rotation makes a standard secret, and from then on
 * `standard` is accepted, also during the grace: the dispatcher then signs with the secrets that
 * are standard only (signStandard), so no request carries a signature its receiver cannot check
 * (docs/receivers/standard-webhooks.md). Every later rotation makes a standard secret too.
 * @throws AppError not_found, conflict (secret_not_standard)
 */
async function assertStandardSecret(deps: ApiDeps, accountId: string, webhookId: string): Promise<void> {
  const webhook = await findWebhook(deps, accountId, webhookId);
  if (isStandardSecret(deps.keyring.decrypt(webhook.secret))) return;
  throw new AppError(
    "conflict",
    "secret_not_standard",
    "the webhook's secret is not whsec_ and standard base64 (secrets made before that rule are URL-safe base64), which Standard Webhooks receivers cannot decode: " +
      'rotate it (POST /v1/webhooks/{id}/secret/rotate) before choosing signature_scheme "standard"',
  );
}

/**
 * Changes url (not a listen webhook's), events, status, rate_limit, inbox_ids, headers (the whole
 * set, stored encrypted) or signature_scheme. The secret is kept and no test event is sent. Disabling ends the
 * webhook's pending destinations as `cancelled`: they get no further attempt.
 * @throws AppError not_found, conflict (`standard` for a secret made before standard base64:
 *   assertStandardSecret; a url for a listen webhook)
 */
export async function updateWebhook(deps: ApiDeps, accountId: string, webhookId: string, input: UpdateWebhookInput): Promise<WebhookView> {
  if (input.url !== undefined) {
    assertDeliverableUrl(deps, input.url, "url");
    // A webhook's mode never changes, so this read cannot go stale.
    if ((await findWebhook(deps, accountId, webhookId)).mode === "listen")
      throw new AppError(
        "conflict",
        "listen_webhook",
        "a listen webhook has no URL: create a webhook with a url for deliveries pushed to it",
      );
  }
  if (input.signature_scheme === "standard") await assertStandardSecret(deps, accountId, webhookId);
  const row = await changeWebhook(
    deps.pool,
    accountId,
    webhookId,
    {
      url: input.url,
      events: input.events,
      status: input.status,
      rateLimit: input.rate_limit,
      inboxIds: input.inbox_ids,
      headers: input.headers === undefined ? undefined : encryptHeaders(deps.keyring, input.headers),
      signatureScheme: input.signature_scheme,
    },
    deps.config.QUEUE_PREFIX,
  );
  if (!row) throw notFound("webhook");
  return rowView(row, deps.keyring);
}

/** A live webhook of the account as answered: `toWebhookView` of `findWebhook`. @throws AppError not_found */
export async function getWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<WebhookView> {
  return toWebhookView(await findWebhook(deps, accountId, webhookId), deps.keyring);
}

/** Soft-deletes: the webhook answers 404 from now on; its history stays readable; its pending destinations are cancelled. @throws AppError not_found */
export async function deleteWebhook(deps: ApiDeps, accountId: string, webhookId: string): Promise<void> {
  if (!(await deleteWebhookState(deps.pool, accountId, webhookId))) throw notFound("webhook");
}

/**
 * The extra headers of a live webhook with their values in clear: only for the dashboard to
 * merge an edit (which adds or removes headers) into the whole set PATCH semantics need; never
 * rendered or answered. @throws AppError not_found
 */
export async function currentHeaders(deps: ApiDeps, accountId: string, webhookId: string): Promise<Record<string, string>> {
  return decryptHeaders(deps.keyring, (await findWebhook(deps, accountId, webhookId)).headers);
}
