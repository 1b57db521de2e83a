import { createHash, randomBytes } from "node:crypto";
import { newId, type PrismaClient } from "@mailhooks/db";
import { createApiKey, type Principal } from "./api-keys.js";

/**
 * One-time dashboard sign-in links (docs/dashboard.md). A link is
 * `<base>/dashboard/sign-in/<token>`; only the token's SHA-256 is stored, with the account and
 * the API key that made it. It works once, within 15 minutes, and only while that key is live;
 * redeeming it opens a session (sessions.ts) for the same key.
 */

export const DASHBOARD_LINK_TTL_MS = 15 * 60_000;
/** Where a link points, below the public base URL. */
export const DASHBOARD_SIGN_IN_PATH = "/dashboard/sign-in/";
/** The name of the key `dashboard-link --account` makes links with (created once per account, never shown). */
export const DASHBOARD_KEY_NAME = "dashboard";

export interface DashboardLink {
  /** Absolute URL of the sign-in page. */
  url: string;
  /** ISO 8601 UTC: the link no longer works from then on. */
  expires_at: string;
}

/** Why a link does not (or no longer) sign in. */
export type LinkRefusal = "unknown" | "used" | "expired" | "revoked";

export class UnknownAccountError extends Error {
  override name = "UnknownAccountError";
}

export const hashToken = (token: string) => createHash("sha256").update(token, "utf8").digest("hex");

/**
 * A token (of a link or of a session) is the 12 hex digits of the public prefix of the API key it
 * acts for, then 32 random bytes in base64url (43 characters); anything else is never looked up.
 * The prefix lets a valid token pass the API's limit of failed authentications from its address
 * as a valid key does (tokenKeyPrefix). Tokens made before carry no prefix: 43 characters.
 */
export const TOKEN_PATTERN = /^(?:[0-9a-f]{12})?[A-Za-z0-9_-]{43}$/;
const PREFIXED_TOKEN = /^([0-9a-f]{12})[A-Za-z0-9_-]{43}$/;

/** A new token for the key whose public prefix is `keyPrefix` (`whk_<12 hex>`). */
export function newToken(keyPrefix: string): string {
  const hex = /^whk_([0-9a-f]{12})$/.exec(keyPrefix)?.[1];
  if (!hex) throw new Error(`not an API key prefix: ${keyPrefix}`);
  return `${hex}${randomBytes(32).toString("base64url")}`;
}

/** The public prefix (`whk_<12 hex>`) of the key a token acts for; null for a token without one. */
export function tokenKeyPrefix(token: string): string | null {
  const hex = PREFIXED_TOKEN.exec(token)?.[1];
  return hex ? `whk_${hex}` : null;
}

/**
 * Issues a link for `principal`'s account, tied to its key. `baseUrl` is the public origin the
 * person will open (e.g. `https://hooks.example.com`; a trailing slash is ignored).
 */
export async function createDashboardLink(
  prisma: PrismaClient,
  principal: Principal,
  baseUrl: string,
  now = new Date(),
): Promise<DashboardLink> {
  const key = await prisma.apiKey.findUniqueOrThrow({ where: { id: principal.apiKeyId }, select: { prefix: true } });
  const token = newToken(key.prefix);
  const expiresAt = new Date(now.getTime() + DASHBOARD_LINK_TTL_MS);
  await prisma.dashboardLink.create({
    data: { tokenHash: hashToken(token), accountId: principal.accountId, apiKeyId: principal.apiKeyId, createdAt: now, expiresAt },
  });
  return { url: `${baseUrl.replace(/\/+$/, "")}${DASHBOARD_SIGN_IN_PATH}${token}`, expires_at: expiresAt.toISOString() };
}

/**
 * A link for the account named `accountName` (`keys dashboard-link --account`): made by the
 * account's live key named "dashboard", issued the first time (its secret is never shown: it
 * only names who acted, in sessions and audit entries). Revoking that key ends every session
 * its links opened; the next link issues a new one.
 * @throws UnknownAccountError when no account has that name
 */
export async function createDashboardLinkForAccount(prisma: PrismaClient, accountName: string, baseUrl: string): Promise<DashboardLink> {
  const account = await prisma.account.findUnique({ where: { name: accountName }, select: { id: true } });
  if (!account) throw new UnknownAccountError(`no account named ${accountName}`);
  const existing = await prisma.apiKey.findFirst({
    where: { accountId: account.id, name: DASHBOARD_KEY_NAME, revokedAt: null },
    orderBy: { id: "desc" },
    select: { id: true },
  });
  const apiKeyId = existing?.id ?? (await createApiKey(prisma, accountName, DASHBOARD_KEY_NAME)).id;
  return createDashboardLink(prisma, { accountId: account.id, apiKeyId }, baseUrl);
}

/** What a link would do if redeemed now, without redeeming it (the sign-in page shows it). */
export async function inspectDashboardLink(prisma: PrismaClient, token: string, now = new Date()): Promise<"valid" | LinkRefusal> {
  if (!TOKEN_PATTERN.test(token)) return "unknown";
  const link = await prisma.dashboardLink.findUnique({
    where: { tokenHash: hashToken(token) },
    select: { usedAt: true, expiresAt: true, apiKey: { select: { revokedAt: true } } },
  });
  if (!link) return "unknown";
  if (link.usedAt) return "used";
  if (link.expiresAt <= now) return "expired";
  if (link.apiKey.revokedAt) return "revoked";
  return "valid";
}

export interface OpenedSession {
  /** The session cookie's value: shown once, stored only as its hash. */
  token: string;
  sessionId: string;
  accountId: string;
  apiKeyId: string;
}

/**
 * Redeems a link: marks it used and opens a session, in one transaction. Of two concurrent
 * redemptions only one succeeds (the second finds the row used once the first's lock is gone).
 */
export async function redeemDashboardLink(
  prisma: PrismaClient,
  token: string,
): Promise<{ session: OpenedSession } | { refused: LinkRefusal }> {
  if (!TOKEN_PATTERN.test(token)) return { refused: "unknown" };
  const tokenHash = hashToken(token);
  const opened = await prisma.$transaction(async (tx) => {
    const rows = await tx.$queryRaw<{ account_id: string; api_key_id: string; prefix: string }[]>`
      UPDATE dashboard_links l SET used_at = now()
        FROM api_keys k
       WHERE l.token_hash = ${tokenHash} AND l.used_at IS NULL AND l.expires_at > now()
         AND k.id = l.api_key_id AND k.revoked_at IS NULL
      RETURNING l.account_id, l.api_key_id, k.prefix`;
    const link = rows[0];
    if (!link) return null;
    const sessionToken = newToken(link.prefix);
    const sessionId = newId("ses");
    await tx.dashboardSession.create({
      data: { id: sessionId, accountId: link.account_id, apiKeyId: link.api_key_id, tokenHash: hashToken(sessionToken) },
    });
    return { token: sessionToken, sessionId, accountId: link.account_id, apiKeyId: link.api_key_id };
  });
  if (opened) return { session: opened };
  const state = await inspectDashboardLink(prisma, token);
  // "valid" only when PostgreSQL's clock and this process's disagree at the 15-minute boundary.
  return { refused: state === "valid" ? "expired" : state };
}
