/**
 * `npm run db:migrate` (docs/operations.md, "Commands"): creates the database named by DATABASE_URL when
 * missing and applies prisma/migrations. Works offline (no Prisma engine needed); safe to run
 * while another run or the service is up.
 */
import { apiConfigSchema, loadConfig } from "@mailhooks/config";
import { MIGRATIONS_DIR, migrate } from "@mailhooks/db";
import { createCommand } from "@mailhooks/command-line";

// The API's own DATABASE_URL rule and default: one definition of the variable.
const environment = apiConfigSchema.pick({ DATABASE_URL: true });

const program = createCommand({
  name: "npm run db:migrate --",
  description: "Create the database named by DATABASE_URL if it is missing and apply every migration of prisma/migrations not applied yet.",
  examples: ["npm run db:migrate", "DATABASE_URL=postgresql://postgres@db.internal:5432/webhooks npm run db:migrate"],
  environment,
}).action(async () => {
  const { DATABASE_URL } = loadConfig(environment, process.env);
  const result = await migrate(DATABASE_URL, MIGRATIONS_DIR);
  for (const name of result.applied) console.log(`applied ${name}`);
  console.log(`database is up to date (${result.applied.length} applied, ${result.alreadyApplied.length} already applied)`);
});

program.parseAsync(process.argv).catch((error: Error) => {
  console.error(`db:migrate: ${error.message}`);
  process.exitCode = 1;
});
