/**
 * Run by scripts/test.mjs before jest: makes the HTTPS receivers' certificate in the folder given
 * as the first argument, and (re)creates the test database (TEST_DATABASE_URL) from
 * prisma/migrations, so every run starts from exactly what `npm run db:migrate` builds; with
 * `--no-database` after the folder (scripts/test-unit.mjs), only the certificate. With
 * `--browser=required` (the whole suite) it first makes sure the browser tests have a Chromium
 * (scripts/chromium.ts: found, or installed with apt-get as root, or it stops with one line
 * saying what to install); `--browser=optional` (a subset) only warns when there is none. With
 * `--drop` instead, after jest: drops that database (the run's own).
 */
import pg from "pg";
import { ensureLocalCertificate } from "@mailhooks/receiver";
import { MIGRATIONS_DIR, migrate } from "@mailhooks/db";
import { testDatabaseUrl } from "../tests/support/env.js";
import { ensureChromium } from "./chromium.js";

const [certDir, ...options] = process.argv.slice(2);
const browser = options.find((option) => option.startsWith("--browser="))?.slice("--browser=".length);
const known = (option: string) => option === "--no-database" || option === "--browser=required" || option === "--browser=optional";
if (!certDir || !options.every(known)) {
  console.error("usage: prepare-tests CERT_DIR [--no-database] [--browser=required|optional] | --drop");
  process.exit(2);
}
const drop = certDir === "--drop";
if (browser !== undefined) {
  const chromium = ensureChromium();
  if ("problem" in chromium) {
    if (browser === "required") {
      console.error(`npm test: the dashboard's browser tests need a Chromium: ${chromium.problem}`);
      process.exit(1);
    }
    console.error(`npm test: warning: the browser tests of this run will fail: ${chromium.problem}`);
  }
}
if (!drop) await ensureLocalCertificate(certDir);
if (options.includes("--no-database")) process.exit(0);

/** The name scripts/test.mjs gives a run's own database. */
const OWN = /^webhooks_test_\d+$/;

/** Whether process `pid` runs on this machine (a reused pid only keeps a leftover longer). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

const url = testDatabaseUrl();
const admin = new URL(url);
const name = decodeURIComponent(admin.pathname.slice(1));
admin.pathname = "/postgres";
const client = new pg.Client({ connectionString: admin.toString() });
await client.connect();
await client.query(`DROP DATABASE IF EXISTS "${name.replaceAll('"', '""')}" WITH (FORCE)`);
if (!drop && OWN.test(name)) {
  // Runs of `npm test` that were killed never dropped their databases (nor their tests'
  // scratch ones, `<name>_<suffix>`): those whose process is gone go now.
  const { rows } = await client.query<{ datname: string }>(
    "SELECT datname FROM pg_database WHERE datname ~ '^webhooks_test_[0-9]+(_.*)?$'",
  );
  for (const { datname } of rows) {
    if (!isAlive(Number(/^webhooks_test_(\d+)/.exec(datname)![1])))
      await client.query(`DROP DATABASE IF EXISTS "${datname.replaceAll('"', '""')}" WITH (FORCE)`);
  }
}
await client.end();
if (!drop) await migrate(url, MIGRATIONS_DIR);
