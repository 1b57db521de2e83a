import { createKeyAuthenticator, MAX_LIVE_PREFIXES, type KeyAuthenticator } from "@mailhooks/access";
import { startListener, type PrismaClient } from "@mailhooks/db";

/**
 * The API process's key cache and what keeps it true: a LISTEN on `api_keys_changed` (the
 * api_keys_notify trigger) forgets a key as soon as it changes (revoked, deleted), and the whole
 * cache is emptied whenever the listener (re)connects, since notifications sent meanwhile are lost.
 * The same notifications keep the set of live keys' prefixes (KeyAuthenticator.plausible), loaded
 * whole at each (re)connection: a valid key this process has not seen yet is not held back by the
 * limit of failed authentications from its address. A prefix missed (a load that failed, a key
 * past MAX_LIVE_PREFIXES) only means that key meets the address limit until it has authenticated once.
 */
export function startKeyAccess(prisma: PrismaClient, databaseUrl: string): { keys: KeyAuthenticator; close: () => Promise<void> } {
  const keys = createKeyAuthenticator(prisma);
  const loadPrefixes = async () => {
    const rows = await prisma.$queryRaw<{ prefix: string }[]>`
      SELECT prefix FROM api_keys WHERE revoked_at IS NULL ORDER BY last_used_at DESC NULLS LAST, created_at DESC LIMIT ${MAX_LIVE_PREFIXES}`;
    keys.livePrefixes(rows.map((row) => row.prefix));
  };
  const refreshPrefix = async (keyId: string) => {
    const rows = await prisma.$queryRaw<
      { prefix: string; live: boolean }[]
    >`SELECT prefix, revoked_at IS NULL AS live FROM api_keys WHERE id = ${keyId}`;
    if (rows[0]) keys.livePrefix(rows[0].prefix, rows[0].live);
  };
  const listener = startListener({
    databaseUrl,
    channels: ["api_keys_changed"],
    onNotification: (_channel, keyId) => {
      keys.forget(keyId);
      refreshPrefix(keyId).catch(() => undefined);
    },
    onConnect: () => {
      keys.forget();
      loadPrefixes().catch(() => undefined);
    },
  });
  return { keys, close: listener.close };
}
