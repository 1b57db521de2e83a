import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { newId, type PrismaClient } from "@mailhooks/db";

/**
 * API keys (docs/operations.md, "Commands"; docs/api.md, "Conventions"). A key reads `whk_<12 hex>_<43 base64url>`: the part
 * before the second underscore is its public prefix, stored in clear to find the row; only the
 * SHA-256 of the whole key is stored, and it is compared in constant time.
 */

export interface IssuedKey {
  id: string;
  key: string;
  account_id: string;
}

export interface KeySummary {
  id: string;
  name: string | null;
  prefix: string;
  account_id: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

export interface Principal {
  apiKeyId: string;
  accountId: string;
}

const KEY_PATTERN = /^(whk_[0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;

/** True when `presented` has the shape of a key (checked before any lookup). */
export const isWellFormedKey = (presented: string) => KEY_PATTERN.test(presented);

/** The public prefix (`whk_<12 hex>`) of a well-formed key; null for anything else. */
export const keyPrefixOf = (presented: string): string | null => KEY_PATTERN.exec(presented)?.[1] ?? null;

const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest();

/** Issues a key for the account named `accountName`, creating the account when new. */
export async function createApiKey(prisma: PrismaClient, accountName: string, label?: string): Promise<IssuedKey> {
  const prefix = `whk_${randomBytes(6).toString("hex")}`;
  const key = `${prefix}_${randomBytes(32).toString("base64url")}`;
  const account = await prisma.account.upsert({
    where: { name: accountName },
    create: { id: newId("acct"), name: accountName },
    update: {},
  });
  const row = await prisma.apiKey.create({
    data: { id: newId("key"), accountId: account.id, name: label ?? null, prefix, hash: sha256(key).toString("hex") },
  });
  return { id: row.id, key, account_id: account.id };
}

/** Revokes a key by id; returns false when there is no such key. Takes effect on the next request. */
export async function revokeApiKey(prisma: PrismaClient, keyId: string): Promise<boolean> {
  const result = await prisma.apiKey.updateMany({ where: { id: keyId, revokedAt: null }, data: { revokedAt: new Date() } });
  if (result.count > 0) return true;
  return (await prisma.apiKey.count({ where: { id: keyId } })) > 0;
}

/** The keys of an account, newest first; never the keys themselves. */
export async function listApiKeys(prisma: PrismaClient, accountName: string): Promise<KeySummary[]> {
  const rows = await prisma.apiKey.findMany({ where: { account: { name: accountName } }, orderBy: { id: "desc" } });
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    prefix: r.prefix,
    account_id: r.accountId,
    created_at: r.createdAt.toISOString(),
    revoked_at: r.revokedAt?.toISOString() ?? null,
    last_used_at: r.lastUsedAt?.toISOString() ?? null,
  }));
}

/** Resolves a presented bearer key; null when malformed, unknown or revoked. */
export async function authenticateKey(prisma: PrismaClient, presented: string): Promise<Principal | null> {
  const match = KEY_PATTERN.exec(presented);
  if (!match) return null;
  // Every request runs this: a raw indexed lookup costs about half of the model query.
  const rows = await prisma.$queryRaw<{ id: string; accountId: string; hash: string }[]>`
    SELECT id, account_id AS "accountId", hash FROM api_keys WHERE prefix = ${match[1]} AND revoked_at IS NULL`;
  const row = rows[0];
  if (!row) return null;
  const expected = Buffer.from(row.hash, "hex");
  const actual = sha256(presented);
  if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return null;
  return { apiKeyId: row.id, accountId: row.accountId };
}

/**
 * Records that key `keyId` was used (`api_keys.last_used_at`), at most once a minute per key per
 * process; never delays the request, and a failure to write is ignored (it is bookkeeping).
 */
export function createUsageRecorder(prisma: PrismaClient, everyMs = 60_000): (keyId: string) => void {
  const lastWrite = new Map<string, number>();
  return (keyId) => {
    const now = Date.now();
    if ((lastWrite.get(keyId) ?? 0) > now - everyMs) return;
    lastWrite.set(keyId, now);
    if (lastWrite.size > 100_000) lastWrite.clear();
    prisma.$executeRaw`UPDATE api_keys SET last_used_at = now() WHERE id = ${keyId}`.catch(() => lastWrite.delete(keyId));
  };
}
