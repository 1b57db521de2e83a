/**
 * `npm run -s keys -- create --account ACCOUNT [--name LABEL] --json | revoke KEY_ID | list --account ACCOUNT`
 * (CONTRACT.md section 1). `create --json` prints exactly one JSON line; a key is shown once.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { loadConfig } from "@mailhooks/config";
import { createPrismaClient } from "@mailhooks/db";
import { createApiKey, listApiKeys, revokeApiKey } from "../services/api-keys.js";

const USAGE = `usage:
  keys create --account ACCOUNT [--name LABEL] [--json]
  keys revoke KEY_ID
  keys list --account ACCOUNT [--json]`;

const envSchema = z.object({
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgresql:// URL").default("postgresql://postgres@127.0.0.1:5432/webhooks"),
});

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { account: { type: "string" }, name: { type: "string" }, json: { type: "boolean", default: false }, help: { type: "boolean", short: "h" } },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  const { DATABASE_URL } = loadConfig(envSchema, process.env);
  const prisma = createPrismaClient(DATABASE_URL, 1);
  try {
    if (command === "create" && values.account && rest.length === 0) {
      const issued = await createApiKey(prisma, values.account, values.name);
      if (values.json) console.log(JSON.stringify(issued));
      else console.log(`key ${issued.id} for account ${issued.account_id}:\n${issued.key}\n(store it now: it is not shown again)`);
      return 0;
    }
    if (command === "revoke" && rest.length === 1) {
      if (!(await revokeApiKey(prisma, rest[0]))) {
        console.error(`no key ${rest[0]}`);
        return 1;
      }
      console.log(values.json ? JSON.stringify({ id: rest[0], revoked: true }) : `revoked ${rest[0]}`);
      return 0;
    }
    if (command === "list" && values.account && rest.length === 0) {
      const keys = await listApiKeys(prisma, values.account);
      if (values.json) console.log(JSON.stringify(keys));
      else for (const k of keys) console.log(`${k.id}  ${k.prefix}…  ${k.name ?? "-"}  created ${k.created_at}${k.revoked_at ? `  revoked ${k.revoked_at}` : ""}`);
      return 0;
    }
    console.error(USAGE);
    return 2;
  } finally {
    await prisma.$disconnect();
  }
}

run(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (error: Error) => {
    console.error(`keys: ${error.message}`);
    process.exitCode = 1;
  },
);
