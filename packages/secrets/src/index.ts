import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/**
 * Webhook secrets at rest (docs/configuration.md, SECRET_ENCRYPTION_KEYS): AES-256-GCM from
 * node:crypto, one module that owns it. A keyring holds one or more 32-byte keys: the first
 * encrypts, every one decrypts, and each ciphertext names the key that made it, so keys can be
 * rotated (add a new key first in the list, run `keys reencrypt-secrets`, then drop the old one).
 *
 * Stored form: `v1.<key id>.<iv>.<ciphertext>.<tag>` (base64url parts; key id = the first 8 hex
 * characters of the key's SHA-256; a 12-byte random IV per secret; the 16-byte GCM tag
 * authenticates the ciphertext and its key id). A value without the `v1.` prefix is a plaintext
 * secret stored before encryption existed: it is read as is, and re-encrypted by the command.
 */

const VERSION = "v1";
const KEY_BYTES = 32;
const IV_BYTES = 12;

/**
 * The development key, used when SECRET_ENCRYPTION_KEYS is unset outside production: fixed and
 * public, so that anything encrypted with it is readable by anyone who reads this file.
 */
export const INSECURE_DEVELOPMENT_KEY = Buffer.from("insecure-development-key-32bytes", "utf8").toString("base64");

/** Thrown when a stored secret cannot be decrypted (unknown key id, tampered or corrupt value). */
export class SecretDecryptionError extends Error {
  override name = "SecretDecryptionError";
}

export interface Keyring {
  /** Id of the key that encrypts (the first). */
  readonly primaryKeyId: string;
  /** Encrypts a secret with the first key. */
  encrypt(plaintext: string): string;
  /** Decrypts a stored secret with the key it names (or returns a legacy plaintext as is). @throws SecretDecryptionError */
  decrypt(stored: string): string;
  /** True when `stored` is already encrypted with the first key. */
  isCurrent(stored: string): boolean;
}

const keyIdOf = (key: Buffer) => createHash("sha256").update(key).digest("hex").slice(0, 8);

/**
 * Parses the base64 keys of SECRET_ENCRYPTION_KEYS (each 32 bytes once decoded).
 * @throws Error naming the position of a key that is not 32 bytes of base64
 */
export function parseKeys(base64Keys: readonly string[]): Buffer[] {
  return base64Keys.map((text, i) => {
    const key = Buffer.from(text.trim(), "base64");
    if (key.length !== KEY_BYTES || key.toString("base64").replace(/=+$/, "") !== text.trim().replace(/=+$/, "")) {
      throw new Error(`key ${i + 1} is not ${KEY_BYTES} bytes of base64 (e.g. the output of \`openssl rand -base64 32\`)`);
    }
    return key;
  });
}

export function createKeyring(keys: readonly Buffer[]): Keyring {
  if (keys.length === 0) throw new Error("a keyring needs at least one key");
  const byId = new Map(keys.map((key) => [keyIdOf(key), key]));
  const primary = keys[0];
  const primaryKeyId = keyIdOf(primary);
  return {
    primaryKeyId,
    encrypt(plaintext) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", primary, iv);
      // The key id is authenticated too: a ciphertext moved under another id fails.
      cipher.setAAD(Buffer.from(primaryKeyId, "utf8"));
      const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
      return [
        VERSION,
        primaryKeyId,
        iv.toString("base64url"),
        ciphertext.toString("base64url"),
        cipher.getAuthTag().toString("base64url"),
      ].join(".");
    },
    decrypt(stored) {
      if (!stored.startsWith(`${VERSION}.`)) return stored;
      const [, keyId, iv, ciphertext, tag] = stored.split(".");
      const key = byId.get(keyId ?? "");
      if (!key || iv === undefined || ciphertext === undefined || tag === undefined) {
        throw new SecretDecryptionError(`no key with id ${keyId} in SECRET_ENCRYPTION_KEYS, or a malformed value`);
      }
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"));
        decipher.setAAD(Buffer.from(keyId, "utf8"));
        decipher.setAuthTag(Buffer.from(tag, "base64url"));
        return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString("utf8");
      } catch {
        throw new SecretDecryptionError(`a secret encrypted with key ${keyId} does not authenticate (tampered or corrupt)`);
      }
    },
    isCurrent(stored) {
      return stored.startsWith(`${VERSION}.${primaryKeyId}.`);
    },
  };
}
