// What `npm test` (scripts/test.mjs) and `npm run test:unit` (scripts/test-unit.mjs) share: their
// command line (jest's own options, checked before anything is prepared: CONTRACT.md section 1),
// the receivers' certificate, and the jest process itself.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
/** Where the HTTPS receivers' certificate is made (kept between runs). */
export const certDir = path.join(root, ".tmp", "certs");

/**
 * The arguments of this command (everything goes to jest). Answers `--help` with `usage` and exits
 * 0; an option jest does not know is an error (exit 2), before anything is prepared.
 */
export function jestArguments(usage) {
  const args = process.argv.slice(2);
  const options = args.includes("--") ? args.slice(0, args.indexOf("--")) : args;
  if (options.includes("-h") || options.includes("--help")) {
    process.stdout.write(usage);
    process.exit(0);
  }
  const unknown = options.some((arg) => arg.startsWith("-")) ? options.find(isUnknownOption(jestOptions())) : undefined;
  if (unknown !== undefined) {
    process.stderr.write(`error: unknown option '${unknown}'\n\n${usage}`);
    process.exit(2);
  }
  return args;
}

/** The long names (both spellings) and the one-letter aliases of jest's command-line options. */
function jestOptions() {
  // jest-cli is jest's own dependency: resolved from jest, as jest resolves it.
  const { yargsOptions } = createRequire(require.resolve("jest"))("jest-cli");
  const names = new Set(["help", "version"]);
  const letters = new Set(["h"]);
  const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  for (const [name, option] of Object.entries(yargsOptions)) {
    names.add(name).add(kebab(name));
    for (const alias of [option.alias ?? []].flat()) (alias.length === 1 ? letters : names).add(alias);
  }
  return { names, letters };
}

/**
 * Whether `arg` is an option jest's command line does not know (it knows `--name`,
 * `--name=value`, `--no-name`, `-x`, `-xy`). jest itself would take `--no-anything` as
 * "anything: false" and run the whole suite.
 */
function isUnknownOption({ names, letters }) {
  return (arg) => {
    if (!arg.startsWith("-") || /^-[0-9]/.test(arg)) return false; // a path, or a negative number
    if (!arg.startsWith("--")) return ![...arg.slice(1).split("=")[0]].every((letter) => letters.has(letter));
    const name = arg.slice(2).split("=")[0];
    return !(names.has(name) || (name.startsWith("no-") && names.has(name.slice(3))));
  };
}

/** Runs scripts/prepare-tests.ts with `args` and `env` over this process's environment; returns its exit status. */
export function prepare(args, env = {}) {
  const made = spawnSync(
    process.execPath,
    [require.resolve("tsx/cli"), "--conditions=source", path.join(root, "scripts", "prepare-tests.ts"), ...args],
    {
      stdio: "inherit",
      env: { ...process.env, ...env },
    },
  );
  return made.status ?? 1;
}

/**
 * Runs jest with `args` and `env` over this process's environment, and returns its exit status.
 * Adds NODE_EXTRA_CA_CERTS naming the receivers' certificate (Node reads it only at start, and the
 * jest process's in-process dispatchers must trust the receivers) and jest's ESM mode (ts-jest
 * compiles the ESM TypeScript sources).
 */
export function runJest(args, env = {}) {
  const jestEnv = {
    ...process.env,
    ...env,
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --experimental-vm-modules --no-warnings=ExperimentalWarning`.trim(),
    NODE_EXTRA_CA_CERTS: path.join(certDir, "localhost.crt"),
    TEST_CERT_DIR: certDir,
  };
  const result = spawnSync(process.execPath, [require.resolve("jest/bin/jest"), ...args], { stdio: "inherit", env: jestEnv, cwd: root });
  return result.status ?? 1;
}
