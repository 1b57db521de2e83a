import type pg from "pg";
import sql from "sql-template-tag";
import { createBatcher, run } from "@mailhooks/delivery-state";
import { setNewest } from "@mailhooks/bounded-map";

/**
 * Webhooks' `rate_limit` (docs/api.md, "Webhooks") as the dispatchers apply it: read from
 * PostgreSQL at most once per `ttlMs` per webhook (the lookups of one moment share one query), so
 * that a PATCH takes effect on every dispatcher within `ttlMs` and a busy webhook costs one small
 * query a second. While PostgreSQL is away the last value known goes on (or none).
 */
export interface RateLimits {
  /** The webhook's rate_limit in requests per second, or null for none. */
  get(webhookId: string): Promise<number | null>;
}

export function createRateLimits(pool: pg.Pool, ttlMs = 1_000, maxEntries = 50_000): RateLimits {
  const known = new Map<string, { limit: number | null; until: number }>();
  const lookups = createBatcher(
    async (ids: string[]) => {
      const unique = [...new Set(ids)];
      const { rows } = await run<{ id: string; rate_limit: number | null }>(
        pool,
        sql`SELECT id, rate_limit FROM webhooks WHERE id = ANY(${unique}::text[])`,
        "scheduler_rate_limits",
      );
      const byId = new Map(rows.map((r) => [r.id, r.rate_limit]));
      return ids.map((id) => byId.get(id) ?? null);
    },
    { maxBatch: 64, maxConcurrency: 1 },
  );
  return {
    async get(webhookId) {
      const entry = known.get(webhookId);
      if (entry && entry.until > Date.now()) return entry.limit;
      try {
        const limit = await lookups.submit(webhookId);
        // A bounded map: the oldest entries go first when it is full.
        setNewest(known, webhookId, { limit, until: Date.now() + ttlMs }, maxEntries);
        return limit;
      } catch {
        return entry?.limit ?? null;
      }
    },
  };
}
