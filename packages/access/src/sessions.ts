import type { PrismaClient } from "@mailhooks/db";
import { hashToken, TOKEN_PATTERN } from "./dashboard-links.js";
import type { Principal } from "./api-keys.js";

/**
 * Dashboard sessions (docs/dashboard.md), opened by redeeming a link. The cookie carries
 * the token; PostgreSQL holds its SHA-256 and the API key that made the link. A session is live
 * while it is not signed out, has been used within the last 12 hours, and its key is not revoked.
 */

export const DASHBOARD_SESSION_IDLE_MS = 12 * 3_600_000;

export interface DashboardPrincipal extends Principal {
  sessionId: string;
  /** The key's label, shown in the dashboard (null when the key has none). */
  apiKeyName: string | null;
  /** The account's name (`keys create --account NAME`). */
  accountName: string;
}

/**
 * Resolves a session cookie and records the use (which restarts the idle clock).
 * @returns null for a malformed, unknown, signed-out, idle-expired or revoked-key session
 */
export async function authenticateSession(prisma: PrismaClient, token: string): Promise<DashboardPrincipal | null> {
  if (!TOKEN_PATTERN.test(token)) return null;
  const idleSeconds = DASHBOARD_SESSION_IDLE_MS / 1000;
  const rows = await prisma.$queryRaw<DashboardPrincipal[]>`
    UPDATE dashboard_sessions s SET last_seen_at = now()
      FROM api_keys k JOIN accounts a ON a.id = k.account_id
     WHERE s.token_hash = ${hashToken(token)} AND s.ended_at IS NULL
       AND s.last_seen_at > now() - make_interval(secs => ${idleSeconds})
       AND k.id = s.api_key_id AND k.revoked_at IS NULL
    RETURNING s.id AS "sessionId", s.account_id AS "accountId", s.api_key_id AS "apiKeyId", k.name AS "apiKeyName", a.name AS "accountName"`;
  return rows[0] ?? null;
}

/** Signs a session out; an unknown or ended one is left as it is. */
export async function endSession(prisma: PrismaClient, token: string): Promise<void> {
  if (!TOKEN_PATTERN.test(token)) return;
  await prisma.dashboardSession.updateMany({ where: { tokenHash: hashToken(token), endedAt: null }, data: { endedAt: new Date() } });
}
