import { createKeyAuthenticator, type KeyAuthenticator } from "@mailhooks/access";
import { startListener, type PrismaClient } from "@mailhooks/db";

/**
 * The API process's key cache and what keeps it true: a LISTEN on `api_keys_changed` (the
 * api_keys_notify trigger) forgets a key as soon as it changes (revoked, deleted), and the whole
 * cache is emptied whenever the listener (re)connects, since notifications sent meanwhile are lost.
 */
export function startKeyAccess(prisma: PrismaClient, databaseUrl: string): { keys: KeyAuthenticator; close: () => Promise<void> } {
  const keys = createKeyAuthenticator(prisma);
  const listener = startListener({
    databaseUrl,
    channels: ["api_keys_changed"],
    onNotification: (_channel, keyId) => keys.forget(keyId),
    onConnect: () => keys.forget(),
  });
  return { keys, close: listener.close };
}
