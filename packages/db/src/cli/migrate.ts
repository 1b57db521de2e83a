/**
 * `npm run db:migrate`: creates the database named by DATABASE_URL when missing and applies
 * prisma/migrations. Works offline (no Prisma engine needed).
 */
import { z } from "zod";
import { loadConfig } from "@mailhooks/config";
import { MIGRATIONS_DIR, migrate } from "../migrate.js";

const schema = z.object({
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgresql:// URL").default("postgresql://postgres@127.0.0.1:5432/webhooks"),
});

try {
  const { DATABASE_URL } = loadConfig(schema, process.env);
  const result = await migrate(DATABASE_URL, MIGRATIONS_DIR);
  for (const name of result.applied) console.log(`applied ${name}`);
  console.log(`database is up to date (${result.applied.length} applied, ${result.alreadyApplied.length} already applied)`);
} catch (error) {
  console.error(`db:migrate: ${(error as Error).message}`);
  process.exitCode = 1;
}
