import { secretKeysOf, type ApiConfig } from "@mailhooks/config";
import { createPool } from "@mailhooks/db";
import { reencryptSecrets } from "@mailhooks/delivery-state";
import { createKeyring, parseKeys, SecretDecryptionError } from "@mailhooks/secrets";

export interface ReencryptSummary {
  /** Webhooks whose secrets or extra headers were rewritten with the first key. */
  reencrypted: number;
  /** Secrets that no key of SECRET_ENCRYPTION_KEYS opens: left as they are. */
  unreadable: number;
  /** The id of the key that now encrypts every readable secret. */
  key_id: string;
}

/**
 * `keys reencrypt-secrets` (docs/configuration.md, SECRET_ENCRYPTION_KEYS): moves every stored
 * webhook secret (plaintext stored before encryption included) and every webhook's encrypted
 * extra headers (docs/api.md, "Webhooks") to the first key. A value that no key opens is left as
 * it is and counted.
 */
export async function reencryptAllSecrets(config: Pick<ApiConfig, "DATABASE_URL" | "SECRET_ENCRYPTION_KEYS">): Promise<ReencryptSummary> {
  const keyring = createKeyring(parseKeys(secretKeysOf(config)));
  const pool = createPool(config.DATABASE_URL, 2);
  try {
    let unreadable = 0;
    const reencrypted = await reencryptSecrets(pool, (stored) => {
      if (keyring.isCurrent(stored)) return null;
      try {
        return keyring.encrypt(keyring.decrypt(stored));
      } catch (error) {
        if (!(error instanceof SecretDecryptionError)) throw error;
        unreadable++;
        return null;
      }
    });
    return { reencrypted, unreadable, key_id: keyring.primaryKeyId };
  } finally {
    await pool.end();
  }
}
