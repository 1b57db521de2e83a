/**
 * Where the tests find their services. Defaults are the service's (docs/configuration.md), on a database of its own so
 * that tests never touch the demo's data: `npm test` names one per run (`webhooks_test_<pid>`,
 * scripts/test.mjs); `webhooks_test` when a test file runs without it.
 */
export function testDatabaseUrl(): string {
  return process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";
}

export function testRedisUrl(): string {
  return process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
}

/** Folder of the HTTPS certificate made by scripts/test.mjs (trusted via NODE_EXTRA_CA_CERTS). */
export function testCertDir(): string {
  const dir = process.env.TEST_CERT_DIR;
  if (!dir) throw new Error("run the tests with `npm test` (it prepares the receivers' certificate)");
  return dir;
}
