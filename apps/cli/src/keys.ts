/**
 * `npm run -s keys -- create --account ACCOUNT [--name LABEL] [--json] | revoke KEY_ID | list
 * --account ACCOUNT [--json] | reencrypt-secrets [--json] | dashboard-link --account ACCOUNT
 * [--base-url URL]` (docs/operations.md, "Commands"): API keys, straight in PostgreSQL at
 * DATABASE_URL. `create --json` prints exactly one JSON line `{"id","key","account_id"}`; a key
 * is shown once and never again (only hashes are stored). `reencrypt-secrets` rewrites every
 * webhook secret with the first SECRET_ENCRYPTION_KEYS key. `dashboard-link` prints one line: a
 * one-time dashboard sign-in URL (docs/dashboard.md) on the API's address (`linkBase`).
 * Exits 1 when the work fails (an unknown account or key, a secret no key opens, an unreachable
 * database, no API at the address a link would point to), 2 on a usage error.
 */
import { apiConfigSchema, loadConfig } from "@mailhooks/config";
import { createPrismaClient, type PrismaClient } from "@mailhooks/db";
import { createApiKey, createDashboardLinkForAccount, listApiKeys, revokeApiKey, UnknownAccountError } from "@mailhooks/access";
import { createCommand, InvalidArgumentError, withExamples } from "@mailhooks/command-line";
import { reencryptAllSecrets } from "./reencrypt-secrets.js";

// The API's own rules and defaults: one definition of each variable. Only reencrypt-secrets
// needs the encryption keys (and NODE_ENV, which makes them mandatory).
const databaseEnvironment = apiConfigSchema.pick({ DATABASE_URL: true });
const secretsEnvironment = apiConfigSchema.pick({ DATABASE_URL: true, NODE_ENV: true, SECRET_ENCRYPTION_KEYS: true });
// Dashboard links are made on the API's address: --base-url, else PUBLIC_URL, else the API's own
// port on this machine (the variables the API reads, so the command run with the API's environment
// points at it).
const linkEnvironment = apiConfigSchema.pick({ DATABASE_URL: true, PUBLIC_URL: true, PORT: true });

/**
 * Where a dashboard link points (docs/dashboard.md, "Signing in"): `baseUrl` when given, else
 * PUBLIC_URL, else `http://127.0.0.1:PORT`. `local` is true for the last: the API must then answer
 * on this machine, which `dashboard-link` checks before it makes a link.
 */
function linkBase(baseUrl: string | undefined, env: { PUBLIC_URL?: string; PORT: number }): { url: string; local: boolean } {
  if (baseUrl !== undefined) return { url: baseUrl, local: false };
  if (env.PUBLIC_URL !== undefined) return { url: env.PUBLIC_URL, local: false };
  return { url: `http://127.0.0.1:${env.PORT}`, local: true };
}

/** Whether the service's API answers `GET <base>/healthz` within 2 s (its body `{"status":"ok"}`). */
async function apiAnswers(base: string): Promise<boolean> {
  try {
    const res = await fetch(new URL("/healthz", base), { signal: AbortSignal.timeout(2_000) });
    const body = (await res.json()) as { status?: unknown };
    return res.ok && body.status === "ok";
  } catch {
    return false;
  }
}

/** An absolute http(s) URL with nothing after its origin but an optional path (commander's parser for --base-url). */
function parseBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError("must be an absolute URL, e.g. http://127.0.0.1:8080");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new InvalidArgumentError("must be an http:// or https:// URL");
  return value;
}

/** Runs `work` with a one-connection client of DATABASE_URL; its result becomes the exit code. */
async function withDatabase(work: (prisma: PrismaClient) => Promise<number>): Promise<void> {
  const { DATABASE_URL } = loadConfig(databaseEnvironment, process.env);
  const prisma = createPrismaClient(DATABASE_URL, 1);
  try {
    process.exitCode = await work(prisma);
  } finally {
    await prisma.$disconnect();
  }
}

/** Whether the account named `name` exists; when not, says so on stderr. */
async function accountExists(prisma: PrismaClient, name: string): Promise<boolean> {
  if (await prisma.account.findUnique({ where: { name }, select: { id: true } })) return true;
  console.error(`keys: no account named ${name}`);
  return false;
}

const program = createCommand({
  name: "npm run -s keys --",
  description: "Issue, list and revoke the API keys of an account (Authorization: Bearer <key> on every /v1 call).",
  examples: [
    "npm run -s keys -- create --account acme --name ci --json",
    "npm run -s keys -- list --account acme",
    "npm run -s keys -- revoke key_019a2b3c4d5e7f00a1b2c3d4e5f60718",
  ],
  environment: secretsEnvironment,
});

withExamples(
  program
    .command("create")
    .description("issue a key for the account named ACCOUNT (created if new); the key is printed once")
    .requiredOption("--account <ACCOUNT>", "the account's name")
    .option("--name <LABEL>", "a label for the key, e.g. where it is used")
    .option("--json", 'print one JSON line {"id","key","account_id"}'),
  ["npm run -s keys -- create --account acme --name ci --json"],
).action((options: { account: string; name?: string; json?: boolean }) =>
  withDatabase(async (prisma) => {
    const issued = await createApiKey(prisma, options.account, options.name);
    if (options.json) console.log(JSON.stringify(issued));
    else console.log(`key ${issued.id} for account ${issued.account_id}:\n${issued.key}\n(store it now: it is not shown again)`);
    return 0;
  }),
);

withExamples(
  program
    .command("revoke")
    .description("revoke a key: the very next request with it answers 401")
    .argument("<KEY_ID>", "the key's id (key_...), as `create` and `list` print it")
    .option("--json", 'print one JSON line {"id","revoked"}'),
  ["npm run -s keys -- revoke key_019a2b3c4d5e7f00a1b2c3d4e5f60718"],
).action((keyId: string, options: { json?: boolean }) =>
  withDatabase(async (prisma) => {
    if (!(await revokeApiKey(prisma, keyId))) {
      console.error(`keys: no key ${keyId}`);
      return 1;
    }
    console.log(options.json ? JSON.stringify({ id: keyId, revoked: true }) : `revoked ${keyId}`);
    return 0;
  }),
);

withExamples(
  program
    .command("list")
    .description("list the account's keys (their prefixes, never the keys)")
    .requiredOption("--account <ACCOUNT>", "the account's name")
    .option("--json", "print one JSON array"),
  ["npm run -s keys -- list --account acme"],
).action((options: { account: string; json?: boolean }) =>
  withDatabase(async (prisma) => {
    if (!(await accountExists(prisma, options.account))) return 1;
    const keys = await listApiKeys(prisma, options.account);
    if (options.json) console.log(JSON.stringify(keys));
    else if (keys.length === 0) console.log(`account ${options.account} has no keys`);
    else
      for (const k of keys)
        console.log(`${k.id}  ${k.prefix}…  ${k.name ?? "-"}  created ${k.created_at}${k.revoked_at ? `  revoked ${k.revoked_at}` : ""}`);
    return 0;
  }),
);

withExamples(
  program
    .command("reencrypt-secrets")
    .description(
      "rewrite every webhook secret (legacy plaintext included) with the first key of SECRET_ENCRYPTION_KEYS; run it after putting a new key first, before dropping an old one",
    )
    .option("--json", 'print one JSON line {"reencrypted","unreadable","key_id"}'),
  ["SECRET_ENCRYPTION_KEYS=NEWKEY,OLDKEY npm run -s keys -- reencrypt-secrets"],
).action(async (options: { json?: boolean }) => {
  const summary = await reencryptAllSecrets(loadConfig(secretsEnvironment, process.env));
  if (options.json) console.log(JSON.stringify(summary));
  else
    console.log(
      `re-encrypted ${summary.reencrypted} webhook secret(s) with key ${summary.key_id}${summary.unreadable ? `; ${summary.unreadable} could not be decrypted with any key of SECRET_ENCRYPTION_KEYS and were left as they are` : ""}`,
    );
  process.exitCode = summary.unreadable > 0 ? 1 : 0;
});

withExamples(
  program
    .command("dashboard-link")
    .description(
      "print a one-time dashboard sign-in link for the account (valid 15 minutes, usable once) on the API's address: --base-url, else PUBLIC_URL, else http://127.0.0.1:PORT, which must then answer",
    )
    .requiredOption("--account <ACCOUNT>", "the account's name")
    .option(
      "--base-url <URL>",
      "the API's address as the browser reaches it (default: PUBLIC_URL, else http://127.0.0.1:PORT)",
      parseBaseUrl,
    ),
  [
    "npm run -s keys -- dashboard-link --account acme",
    "PORT=8080 npm run -s keys -- dashboard-link --account acme",
    "npm run -s keys -- dashboard-link --account acme --base-url https://webhooks.example.com",
  ],
).action((options: { account: string; baseUrl?: string }) =>
  withDatabase(async (prisma) => {
    const env = loadConfig(linkEnvironment, process.env);
    const base = linkBase(options.baseUrl, env);
    if (!(await accountExists(prisma, options.account))) return 1;
    // A link to a port where no API listens would not work: say so instead of printing one.
    if (base.local && !(await apiAnswers(base.url))) {
      console.error(
        `keys: no API answers at ${base.url} (PORT=${env.PORT}): run this with the API's PORT or PUBLIC_URL, or give --base-url`,
      );
      return 1;
    }
    try {
      console.log((await createDashboardLinkForAccount(prisma, options.account, base.url)).url);
      return 0;
    } catch (error) {
      if (!(error instanceof UnknownAccountError)) throw error;
      console.error(`keys: ${error.message}`);
      return 1;
    }
  }),
);

program.parseAsync(process.argv).catch((error: Error) => {
  console.error(`keys: ${error.message}`);
  process.exitCode = 1;
});
