import { randomUUID } from "node:crypto";
import { createPrismaClient, type PrismaClient } from "@mailhooks/db";
import { createApiKey, revokeApiKey } from "./api-keys.js";
import { createKeyAuthenticator } from "./key-cache.js";

/** The key cache against the test database (what `npm test` migrates). */
describe("createKeyAuthenticator", () => {
  let prisma: PrismaClient;
  beforeAll(() => {
    prisma = createPrismaClient(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 2);
  });
  afterAll(() => prisma.$disconnect());

  test("a key is cached for ttlMs, then looked up again; it stays known as real for a day unless forgotten", async () => {
    const issued = await createApiKey(prisma, `cache-${randomUUID()}`);
    const keys = createKeyAuthenticator(prisma, { ttlMs: 50 });
    expect(keys.knownValid(issued.key)).toBe(false);
    expect(await keys.authenticate(issued.key)).toEqual({ apiKeyId: issued.id, accountId: issued.account_id });
    expect(keys.cached(issued.key)?.apiKeyId).toBe(issued.id);
    expect(keys.lookups).toBe(1);
    await new Promise((r) => setTimeout(r, 80));
    expect(keys.cached(issued.key)).toBeUndefined();
    expect(keys.knownValid(issued.key)).toBe(true);
    expect(await keys.authenticate(issued.key)).not.toBeNull();
    expect(keys.lookups).toBe(2);
    // Revoked: the notification's forget drops both; the next lookup finds it revoked.
    await revokeApiKey(prisma, issued.id);
    keys.forget(issued.id);
    expect(keys.cached(issued.key)).toBeUndefined();
    expect(keys.knownValid(issued.key)).toBe(false);
    expect(await keys.authenticate(issued.key)).toBeNull();
  });

  test("an unknown key is remembered (one lookup), malformed ones never looked up", async () => {
    const keys = createKeyAuthenticator(prisma);
    const unknown = `whk_${"a".repeat(12)}_${"B".repeat(43)}`;
    for (let i = 0; i < 5; i++) expect(await keys.authenticate(unknown)).toBeNull();
    expect(await keys.authenticate("not-a-key")).toBeNull();
    expect(keys.lookups).toBe(1);
    expect(keys.knownValid(unknown)).toBe(false);
  });

  test("a lookup in flight when forget() runs caches nothing: the revocation is not undone by an older answer", async () => {
    const issued = await createApiKey(prisma, `cache-${randomUUID()}`);
    const keys = createKeyAuthenticator(prisma);
    // The lookup reads the key while it is still live; the revocation's notification (forget)
    // arrives before that answer does.
    const inFlight = keys.authenticate(issued.key);
    expect(keys.lookups).toBe(1);
    keys.forget(issued.id);
    expect(await inFlight).toEqual({ apiKeyId: issued.id, accountId: issued.account_id });
    await revokeApiKey(prisma, issued.id);
    expect(keys.cached(issued.key)).toBeUndefined();
    expect(keys.knownValid(issued.key)).toBe(false);
    expect(await keys.authenticate(issued.key)).toBeNull();

    // Likewise a key created while a lookup of it was in flight: the "unknown" answer read before
    // it existed is not remembered past forget(), so the new key works at once.
    const unknown = `whk_${"c".repeat(12)}_${"D".repeat(43)}`;
    const miss = keys.authenticate(unknown);
    keys.forget();
    expect(await miss).toBeNull();
    const before = keys.lookups;
    await keys.authenticate(unknown);
    expect(keys.lookups).toBe(before + 1);
  });
});
