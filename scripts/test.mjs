// `npm test`: prepares what the suite needs before jest starts, then runs jest.
// - the HTTPS receivers' certificate and a freshly migrated test database (prepare-tests.ts);
// - NODE_EXTRA_CA_CERTS naming that certificate: Node reads it only at start, and the jest
//   process's in-process dispatchers must trust the receivers;
// - jest's ESM mode (ts-jest compiles the ESM TypeScript sources).
// Extra arguments go to jest, e.g. `npm test -- tests/e2e/retry.test.ts`.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const certDir = path.join(root, ".tmp", "certs");

const made = spawnSync(process.execPath, [require.resolve("tsx/cli"), "--conditions=source", path.join(root, "scripts", "prepare-tests.ts"), certDir], { stdio: "inherit" });
if (made.status !== 0) process.exit(made.status ?? 1);

const env = {
  ...process.env,
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --experimental-vm-modules --no-warnings=ExperimentalWarning`.trim(),
  NODE_EXTRA_CA_CERTS: path.join(certDir, "localhost.crt"),
  TEST_CERT_DIR: certDir,
};
const jest = require.resolve("jest/bin/jest");
const result = spawnSync(process.execPath, [jest, ...process.argv.slice(2)], { stdio: "inherit", env, cwd: root });
process.exit(result.status ?? 1);
