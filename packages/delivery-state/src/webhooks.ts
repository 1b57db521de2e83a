import type pg from "pg";
import sql from "sql-template-tag";
import { inTransaction, run, type Queryable } from "./db.js";
import { cancelPendingOfWebhook } from "./status.js";
import { disabledNotice } from "./notices.js";
import { backInRound } from "./work-queue.js";

/**
 * Webhooks' delivery state (docs/api.md, "Webhooks"): their changes, secret rotation and
 * re-encryption, and the status changes that end pending destinations (`cancelled`) when a
 * webhook is disabled or deleted. Registration and test deliveries: webhook-registration.ts.
 */

export interface WebhookRow {
  id: string;
  account_id: string;
  /** Null for a listen webhook. */
  url: string | null;
  /** push, or listen: its work waits until its developer pulls it (listen.ts). */
  mode: "push" | "listen";
  events: string[];
  /** The stored (encrypted) secret: the newest one. */
  secret: string;
  status: "enabled" | "paused" | "disabled";
  disabled_reason: "manual" | "failing" | "idle" | null;
  /** When the newest secret starts signing (after a rotation); null when no rotation is pending or done. */
  secret_activates_at: Date | null;
  /** Requests per second at most (docs/api.md, "Webhooks"); null: no limit. */
  rate_limit: number | null;
  /** The inboxes whose events it receives; null: every inbox of the account. */
  inbox_ids: string[] | null;
  /** Its extra request headers in stored form (an encrypted JSON object); null: none. */
  headers: string | null;
  /** How its requests are signed (docs/receivers/standard-webhooks.md). */
  signature_scheme: "service" | "standard";
  /** A listen webhook's last pull. */
  last_pulled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The columns of a WebhookRow, in a RETURNING or SELECT list. */
export const WEBHOOK_COLUMNS = sql`id, account_id, url, mode, last_pulled_at, events, secret, status::text AS status, disabled_reason::text AS disabled_reason,
  secret_activates_at, rate_limit, inbox_ids, headers, signature_scheme, created_at, updated_at`;

export interface WebhookChange {
  url?: string;
  events?: string[];
  status?: "enabled" | "paused" | "disabled";
  /** null lifts the limit; absent keeps it. */
  rateLimit?: number | null;
  /** null: every inbox again; absent keeps the list. */
  inboxIds?: string[] | null;
  /** The whole new set in stored (encrypted) form, null for none; absent keeps the set. */
  headers?: string | null;
  /** Absent keeps it. The caller checks that the secret suits `standard` (the API answers 409). */
  signatureScheme?: "service" | "standard";
}

/**
 * Changes a live webhook (PATCH), in one transaction:
 * - disabling (`disabled_reason: "manual"`) cancels its pending destinations (they get no further
 *   attempt: docs/api.md, "Statuses") and writes a `webhook.disabled` notice;
 * - pausing keeps its destinations coming and waiting (`paused_at` says since when);
 * - resuming a paused webhook moves its failing streak's start by the time it was paused (time
 *   paused does not count toward auto-disable); enabling a disabled one clears the reason and its
 *   failing streaks, also after an auto-disable;
 * - resuming, or changing its rate_limit, puts it back in the claim's round at once (a paused
 *   webhook is parked out of it, a rate-limited one may wait there for a turn of the old limit).
 * The secret is kept. `queuePrefix` is the deployment whose dispatchers make the notice's event.
 * @returns the changed webhook, or null when there is no such live webhook
 */
export async function changeWebhook(
  pool: pg.Pool,
  accountId: string,
  webhookId: string,
  change: WebhookChange,
  queuePrefix: string,
): Promise<WebhookRow | null> {
  const to = change.status;
  const statusChange =
    to === undefined
      ? sql``
      : sql`, status = ${to}::"WebhookStatus",
            disabled_reason = (CASE WHEN status::text = ${to} THEN disabled_reason WHEN ${to} = 'disabled' THEN 'manual' END)::"DisabledReason",
            paused_at = (CASE WHEN ${to} = 'paused' THEN coalesce(paused_at, now()) END),
            failing_since = (CASE WHEN ${to} <> 'enabled' OR status::text = 'enabled' THEN failing_since
                                  WHEN status::text = 'paused' THEN failing_since + (now() - paused_at) END),
            failing_events = (CASE WHEN ${to} = 'enabled' AND status::text = 'disabled' THEN 0 ELSE failing_events END),
            consecutive_failures = (CASE WHEN ${to} = 'enabled' AND status::text = 'disabled' THEN 0 ELSE consecutive_failures END),
            failing_noticed_at = (CASE WHEN ${to} = 'enabled' AND status::text = 'disabled' THEN NULL ELSE failing_noticed_at END)`;
  const optionChanges = [
    change.rateLimit === undefined ? sql`` : sql`, rate_limit = ${change.rateLimit}::int`,
    change.inboxIds === undefined ? sql`` : sql`, inbox_ids = ${change.inboxIds}::text[]`,
    change.headers === undefined ? sql`` : sql`, headers = ${change.headers}::text`,
    change.signatureScheme === undefined ? sql`` : sql`, signature_scheme = ${change.signatureScheme}`,
  ];
  return inTransaction(pool, async (client) => {
    const before = await run<{ status: WebhookRow["status"]; rate_limit: number | null }>(
      client,
      sql`SELECT status::text AS status, rate_limit FROM webhooks
           WHERE id = ${webhookId} AND account_id = ${accountId} AND deleted_at IS NULL FOR UPDATE`,
    );
    if (before.rows.length === 0) return null;
    const was = before.rows[0];
    const { rows } = await run<WebhookRow>(
      client,
      sql`UPDATE webhooks SET
            url = coalesce(${change.url ?? null}, url),
            events = coalesce(${change.events ?? null}::text[], events),
            updated_at = now() ${statusChange} ${optionChanges[0]} ${optionChanges[1]} ${optionChanges[2]} ${optionChanges[3]}
          WHERE id = ${webhookId}
          RETURNING ${WEBHOOK_COLUMNS}`,
    );
    const now = rows[0];
    if (now.status === "disabled" && was.status !== "disabled") {
      await endWork(client, webhookId);
      await run(client, disabledNotice(webhookId, queuePrefix, "manual"));
    }
    if ((now.status === "enabled" && was.status !== "enabled") || (change.rateLimit !== undefined && change.rateLimit !== was.rate_limit))
      await run(client, backInRound(webhookId));
    return now;
  });
}

/**
 * Rotates a live webhook's secret (docs/api.md, "Webhooks"): `newSecret` (stored form) signs from
 * `graceSeconds` from now on; until then the secret that signs now goes on signing. A rotation
 * during the grace period of another replaces the pending secret and keeps the one that signs.
 * @returns when the new secret starts signing, or null when there is no such live webhook
 */
export async function rotateSecret(
  pool: pg.Pool,
  accountId: string,
  webhookId: string,
  newSecret: string,
  graceSeconds: number,
): Promise<Date | null> {
  const { rows } = await run<{ secret_activates_at: Date }>(
    pool,
    sql`UPDATE webhooks SET
          previous_secret = (CASE WHEN secret_activates_at > now() THEN previous_secret ELSE secret END),
          secret = ${newSecret},
          secret_activates_at = now() + make_interval(secs => ${graceSeconds}),
          updated_at = now()
        WHERE id = ${webhookId} AND account_id = ${accountId} AND deleted_at IS NULL
        RETURNING secret_activates_at`,
  );
  return rows[0]?.secret_activates_at ?? null;
}

/**
 * Auto-disable (docs/api.md, "Webhooks"): disables an enabled webhook with `disabled_reason:
 * "failing"`, cancels its pending destinations and writes a `webhook.disabled` notice (made into
 * an event by `queuePrefix`'s dispatchers), in one transaction.
 * @returns false when it was not enabled any more (paused, disabled, deleted, or done by another dispatcher)
 */
export async function autoDisableWebhook(pool: pg.Pool, webhookId: string, queuePrefix: string): Promise<boolean> {
  return inTransaction(pool, async (client) => {
    const { rowCount } = await run(
      client,
      sql`UPDATE webhooks SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
           WHERE id = ${webhookId} AND status = 'enabled' AND deleted_at IS NULL`,
    );
    if (!rowCount) return false;
    await endWork(client, webhookId);
    await run(client, disabledNotice(webhookId, queuePrefix, "failing"));
    return true;
  });
}

/**
 * LISTEN_IDLE_HOURS (docs/develop-locally.md): disables, with `disabled_reason: "idle"`, the
 * listen webhooks neither pulled nor changed for `idleMs`, cancels what waited for them (their
 * pending destinations; their replays and tests are ended when claimed) and writes a
 * `webhook.disabled` notice for each, at most `batch` webhooks per call, each in a transaction
 * of its own.
 * @returns how many were disabled
 */
export async function disableIdleListenWebhooks(pool: pg.Pool, idleMs: number, queuePrefix: string, batch = 100): Promise<number> {
  const { rows } = await run<{ id: string }>(
    pool,
    sql`SELECT id FROM webhooks
         WHERE mode = 'listen' AND status <> 'disabled'
           AND (last_pulled_at IS NULL OR last_pulled_at < now() - make_interval(secs => ${idleMs / 1000}))
           AND greatest(coalesce(last_pulled_at, created_at), updated_at) < now() - make_interval(secs => ${idleMs / 1000})
         ORDER BY last_pulled_at NULLS FIRST LIMIT ${batch}`,
  );
  let disabled = 0;
  for (const { id } of rows) {
    const done = await inTransaction(pool, async (client) => {
      const { rowCount } = await run(
        client,
        sql`UPDATE webhooks SET status = 'disabled', disabled_reason = 'idle', paused_at = NULL, updated_at = now()
             WHERE id = ${id} AND mode = 'listen' AND status <> 'disabled'
               AND greatest(coalesce(last_pulled_at, created_at), updated_at) < now() - make_interval(secs => ${idleMs / 1000})`,
      );
      if (!rowCount) return false;
      await endWork(client, id);
      await run(client, disabledNotice(id, queuePrefix, "idle"));
      return true;
    });
    if (done) disabled++;
  }
  return disabled;
}

/**
 * Rewrites every stored secret that `reencrypt` changes (the command that moves all secrets to
 * the first key of SECRET_ENCRYPTION_KEYS): the secret, the previous secret and the encrypted
 * extra headers, `batchSize` webhooks at a time; each row is only written if it was not changed
 * meanwhile. Returns how many webhooks were rewritten.
 */
export async function reencryptSecrets(pool: pg.Pool, reencrypt: (stored: string) => string | null, batchSize = 500): Promise<number> {
  let after = "";
  let total = 0;
  for (;;) {
    const { rows } = await run<{ id: string; secret: string; previous_secret: string | null; headers: string | null }>(
      pool,
      sql`SELECT id, secret, previous_secret, headers FROM webhooks WHERE id > ${after} ORDER BY id LIMIT ${batchSize}`,
    );
    for (const row of rows) {
      const secret = reencrypt(row.secret);
      const previous = row.previous_secret === null ? null : reencrypt(row.previous_secret);
      const headers = row.headers === null ? null : reencrypt(row.headers);
      if (secret === null && previous === null && headers === null) continue;
      const { rowCount } = await run(
        pool,
        sql`UPDATE webhooks SET secret = ${secret ?? row.secret}, previous_secret = ${previous ?? row.previous_secret},
                                headers = ${headers ?? row.headers}
             WHERE id = ${row.id} AND secret = ${row.secret} AND previous_secret IS NOT DISTINCT FROM ${row.previous_secret}
               AND headers IS NOT DISTINCT FROM ${row.headers}`,
      );
      total += rowCount ?? 0;
    }
    if (rows.length < batchSize) return total;
    after = rows[rows.length - 1].id;
  }
}

/**
 * Soft-deletes a live webhook: it answers 404 from now on, its history stays readable, and its
 * pending destinations are cancelled.
 * @returns false when there is no such live webhook
 */
export async function deleteWebhook(pool: pg.Pool, accountId: string, webhookId: string): Promise<boolean> {
  return inTransaction(pool, async (client) => {
    const { rowCount } = await run(
      client,
      sql`UPDATE webhooks SET deleted_at = now(), status = 'disabled', updated_at = now()
           WHERE id = ${webhookId} AND account_id = ${accountId} AND deleted_at IS NULL`,
    );
    if (!rowCount) return false;
    await endWork(client, webhookId);
    return true;
  });
}

/**
 * What a webhook's disabling or deletion does to its work, in the caller's transaction: its
 * pending destinations are cancelled, and it is put back in the claim's round, so that what it
 * parked while paused or listening (replays, test requests) is claimed and ended unsent.
 */
async function endWork(client: Queryable, webhookId: string): Promise<void> {
  await run(client, cancelPendingOfWebhook(webhookId));
  await run(client, backInRound(webhookId));
}
