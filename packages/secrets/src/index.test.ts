import { randomBytes } from "node:crypto";
import { createKeyring, INSECURE_DEVELOPMENT_KEY, parseKeys, SecretDecryptionError } from "./index.js";

describe("webhook secrets at rest (AES-256-GCM)", () => {
  const [a, b] = [randomBytes(32), randomBytes(32)];

  test("round trip; the stored form names its key and never contains the secret", () => {
    const ring = createKeyring([a]);
    const stored = ring.encrypt("whsec_topsecret");
    expect(stored).toMatch(/^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(stored).not.toContain("topsecret");
    expect(ring.decrypt(stored)).toBe("whsec_topsecret");
    // A fresh IV each time.
    expect(ring.encrypt("whsec_topsecret")).not.toBe(stored);
  });

  test("the first key encrypts, every key decrypts", () => {
    const old = createKeyring([a]).encrypt("whsec_old");
    const rotated = createKeyring([b, a]);
    expect(rotated.decrypt(old)).toBe("whsec_old");
    expect(rotated.isCurrent(old)).toBe(false);
    expect(rotated.isCurrent(rotated.encrypt("x"))).toBe(true);
    expect(() => createKeyring([b]).decrypt(old)).toThrow(SecretDecryptionError);
  });

  test("tampering with the ciphertext, the tag or the key id is detected", () => {
    const ring = createKeyring([a, b]);
    const stored = ring.encrypt("whsec_x");
    const parts = stored.split(".");
    const flip = (s: string) => (s[0] === "A" ? "B" : "A") + s.slice(1);
    for (const i of [2, 3, 4]) {
      const bad = [...parts];
      bad[i] = flip(bad[i]);
      expect(() => ring.decrypt(bad.join("."))).toThrow(SecretDecryptionError);
    }
    const moved = [...parts];
    moved[1] = createKeyring([b]).primaryKeyId;
    expect(() => ring.decrypt(moved.join("."))).toThrow(SecretDecryptionError);
  });

  test("a legacy plaintext secret is read as is", () => {
    expect(createKeyring([a]).decrypt("whsec_legacy")).toBe("whsec_legacy");
  });

  test("keys must be 32 bytes of base64", () => {
    expect(parseKeys([INSECURE_DEVELOPMENT_KEY])[0]).toHaveLength(32);
    expect(() => parseKeys([a.toString("base64"), "c2hvcnQ="])).toThrow(/key 2 is not 32 bytes/);
    expect(() => parseKeys(["not base64 at all!!"])).toThrow(/key 1/);
  });
});
