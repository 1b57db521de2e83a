import { z } from "zod";
import {
  answerPulled,
  decodeExcerpt,
  MAX_PULLED,
  pullWork,
  RESPONSE_BODY_LIMIT_BYTES,
  signingAt,
  type AttemptRecord,
  type PulledWork,
} from "@mailhooks/delivery-state";
import { deliveryHeaders } from "@mailhooks/signing";
import type { ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import type { PendingDeliveryView, PendingListView } from "../schemas/pending.js";
import type { DeliveryView } from "../schemas/deliveries.js";
import { toDeliveryView } from "./deliveries.js";
import { decryptHeaders } from "./webhook-options.js";

/**
 * A listen webhook's pending deliveries (docs/develop-locally.md): pulls that wait for work
 * without holding a PostgreSQL connection, and the answers that record each attempt.
 */

const digits = (name: string, min: number, max: number, fallback: number) => {
  const message = `must be an integer from ${min} to ${max}`;
  return z
    .preprocess(
      (value) => (typeof value === "string" && !/^[0-9]{1,10}$/.test(value) ? Number.NaN : value),
      z.coerce.number({ message }).int(message).min(min, message).max(max, message).default(fallback),
    )
    .meta({ description: name });
};

/** The longest a pull waits for work, in seconds. */
const MAX_PULL_WAIT_S = 30;

/** GET /v1/webhooks/{id}/pending. */
export const pendingQuerySchema = z.strictObject({
  wait: digits(`seconds to wait for work when none waits, 0 to ${MAX_PULL_WAIT_S} (default 0: answer at once)`, 0, MAX_PULL_WAIT_S, 0),
  limit: digits(`most deliveries handed out, 1 to ${MAX_PULLED} (default 10)`, 1, MAX_PULLED, 10),
});
export type PendingQuery = z.infer<typeof pendingQuerySchema>;

/** The errors the deliveries log knows for an attempt that got no answer (docs/api.md, "Deliveries log"). */
const ANSWER_ERRORS = ["timeout", "connection_error", "tls_error", "dns_error"] as const;

/** POST /v1/webhooks/{id}/pending/{delivery_id}: what the local receiver answered, or why it did not. */
export const pendingAnswerSchema = z
  .strictObject({
    status: z
      .number({ message: "must be an HTTP status, 100 to 599" })
      .int("must be an HTTP status, 100 to 599")
      .min(100, "must be an HTTP status, 100 to 599")
      .max(599, "must be an HTTP status, 100 to 599")
      .optional()
      .meta({ description: "the status your receiver answered: a 2xx delivers, anything else is retried on the schedule" }),
    error: z
      .enum(ANSWER_ERRORS, { message: `must be one of ${ANSWER_ERRORS.join(", ")}` })
      .optional()
      .meta({ description: "instead of `status`: why no answer came" }),
    duration_ms: z
      .number({ message: "must be an integer of ms, 0 to 3600000" })
      .int("must be an integer of ms, 0 to 3600000")
      .min(0, "must be an integer of ms, 0 to 3600000")
      .max(3_600_000, "must be an integer of ms, 0 to 3600000")
      .meta({ description: "how long the request took, in ms" }),
    response_body: z
      .string()
      .max(64 * 1024, "must be at most 65536 characters")
      .optional()
      .meta({ description: `your receiver's answer; its first ${RESPONSE_BODY_LIMIT_BYTES} bytes are kept` }),
  })
  .superRefine((answer, ctx) => {
    if ((answer.status === undefined) === (answer.error === undefined))
      ctx.addIssue({ code: "custom", path: ["status"], message: "give either status (an answer came) or error (none came)" });
  });
export type PendingAnswer = z.infer<typeof pendingAnswerSchema>;

/**
 * Pulls the account's listen webhook `webhookId`: what waits now, else (with `wait`) the first
 * work that comes within `wait` seconds. A waiting pull holds a place among the account's
 * (pull-waiters.ts) and no PostgreSQL connection: it is woken by notifications of its webhook's
 * work, or by its own timer when something of it comes due (a retry, a pull that lapses).
 * `signal` aborts the wait when the client goes away. Each item is signed now.
 * @throws AppError not_found, conflict (a push webhook; a disabled one), rate_limited (the
 *   account's or the process's waiting pulls are all held)
 */
export async function pullPending(
  deps: ApiDeps,
  accountId: string,
  webhookId: string,
  query: PendingQuery,
  signal: AbortSignal,
): Promise<PendingListView> {
  // Past the account's waiting pulls, a pull still answers the work that waits now; with none, 429.
  const place = query.wait > 0 ? deps.pulls.enter(accountId) : undefined;
  try {
    const deadline = Date.now() + (place ? query.wait * 1000 : 0);
    for (;;) {
      const pulled = await pullWork(deps.pool, accountId, webhookId, query.limit);
      if (pulled.webhook !== "listen") throw refusal(pulled.webhook);
      if (place === null && pulled.items.length === 0) {
        throw new AppError("rate_limited", "waiting_pulls", "too many waiting pulls for this account; retry in 1 s", {
          headers: { "Retry-After": "1" },
        });
      }
      const left = deadline - Date.now();
      if (pulled.items.length > 0 || left <= 0 || signal.aborted) return { data: pulled.items.map((item) => pendingView(deps, item)) };
      // At least a few ms: work found due but locked by a concurrent pull is leased by it at its commit.
      const woken = await deps.pulls.wait(webhookId, Math.min(left, Math.max(pulled.nextInMs ?? left, 20)), signal);
      // Closing, or the client gone: no pull more, which would hand out work to nobody for 60 s.
      if (!woken || signal.aborted) return { data: [] };
    }
  } finally {
    place?.release();
  }
}

/** Why a webhook cannot be pulled. */
function refusal(webhook: "missing" | "push" | "disabled"): AppError {
  if (webhook === "missing") return notFound("webhook");
  if (webhook === "push")
    return new AppError(
      "conflict",
      "not_a_listen_webhook",
      "the webhook's deliveries are pushed to its URL: only a listen webhook's are pulled",
    );
  return new AppError("conflict", "webhook_disabled", "the webhook is disabled: enable it (PATCH status enabled) to pull again");
}

/** One pulled item as answered: its request, signed now under the webhook's scheme. */
function pendingView(deps: ApiDeps, item: PulledWork): PendingDeliveryView {
  const decrypt = (stored: string) => deps.keyring.decrypt(stored);
  const headers = deliveryHeaders({
    signing: signingAt(decrypt, item.webhook, new Date()),
    eventId: item.headerEventId,
    body: item.body,
    own: decryptHeaders(deps.keyring, item.webhook.storedHeaders),
    timestamp: Math.floor(Date.now() / 1000),
  });
  return { delivery_id: item.pullId, event_id: item.eventId, trigger: item.trigger, attempt: item.attempt, headers, body: item.body };
}

/**
 * Records the answer to pulled delivery `deliveryId` of listen webhook `webhookId` as its
 * delivery row (a repeat of an answer already recorded answers that row again).
 * @throws AppError not_found (no such pulled delivery of this webhook), conflict (its 60 s passed
 *   and it was taken back: it is handed out again)
 */
export async function answerPending(
  deps: ApiDeps,
  accountId: string,
  webhookId: string,
  deliveryId: string,
  answer: PendingAnswer,
): Promise<DeliveryView> {
  const body = answer.response_body === undefined ? null : Buffer.from(answer.response_body, "utf8");
  const result: AttemptRecord = {
    ok: answer.status !== undefined && answer.status >= 200 && answer.status < 300,
    responseStatus: answer.status ?? null,
    error: answer.error ?? null,
    responseBody:
      body === null ? null : decodeExcerpt(body.subarray(0, RESPONSE_BODY_LIMIT_BYTES), body.length > RESPONSE_BODY_LIMIT_BYTES),
    durationMs: answer.duration_ms,
  };
  const outcome = await answerPulled(deps.pool, {
    accountId,
    webhookId,
    pullId: deliveryId,
    result,
    retryDelaysMs: deps.config.DELIVERY_RETRY_DELAYS_MS,
  });
  if (outcome === "expired")
    throw new AppError(
      "conflict",
      "pull_expired",
      "the delivery was not answered within 60 s of its pull: it was taken back and is handed out again",
    );
  const row = outcome === "recorded" ? await deps.prisma.delivery.findFirst({ where: { id: deliveryId, accountId, webhookId } }) : null;
  if (!row) throw notFound("pulled delivery");
  return toDeliveryView(row);
}
