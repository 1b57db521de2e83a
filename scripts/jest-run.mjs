// What `npm test` (scripts/test.mjs) and `npm run test:unit` (scripts/test-unit.mjs) share: their
// command line (jest's own options, checked before anything is prepared: every command answers
// --help and refuses an unknown option), the receivers' certificate, and the jest runs, in which
// the files that must run alone (jest.config.ts, ALONE_FILES) run one at a time after the others.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
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

/** jest's command-line options as its yargs parser declares them. */
function yargsOptions() {
  // jest-cli is jest's own dependency: resolved from jest, as jest resolves it.
  return createRequire(require.resolve("jest"))("jest-cli").yargsOptions;
}

/** The long names (both spellings) and the one-letter aliases of jest's command-line options. */
function jestOptions() {
  const options = yargsOptions();
  const names = new Set(["help", "version"]);
  const letters = new Set(["h"]);
  const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  for (const [name, option] of Object.entries(options)) {
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

const NO_TEST_RUN = /^--(listTests|list-tests|showConfig|show-config|clearCache|clear-cache|init|version)$/;
const WORKER_OPTION = /^(-w|-i|--maxWorkers|--max-workers|--runInBand|--run-in-band)(=|$)/;

/**
 * `args` split into jest's options (each with its values, in order) and its positional arguments
 * (test path patterns), as jest's parser reads them: an option of type string or number takes the
 * next argument, an array option every following argument up to the next option.
 */
export function splitJestArguments(args) {
  const declared = yargsOptions();
  const byName = new Map();
  for (const [name, option] of Object.entries(declared)) {
    const kebab = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    for (const key of [name, kebab, ...[option.alias ?? []].flat()]) byName.set(key, option.type);
  }
  const options = [];
  const paths = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") continue;
    if (!arg.startsWith("-") || /^-[0-9]/.test(arg)) {
      paths.push(arg);
      continue;
    }
    const option = [arg];
    const name = arg.replace(/^--?/, "");
    const type = arg.includes("=") ? "boolean" : byName.get(name);
    if (type === "string" || type === "number") {
      if (i + 1 < args.length) option.push(args[++i]);
    } else if (type === "array") {
      while (i + 1 < args.length && !args[i + 1].startsWith("-")) option.push(args[++i]);
    }
    options.push(option);
  }
  return { options, paths };
}

/**
 * The jest runs that `args` (jest's own arguments) make, so that the files of `aloneFiles`
 * (ALONE_FILES of jest.config.ts, relative to the root) that the arguments select run one at a
 * time after the others, which run with one worker per core, whatever subset is asked for
 * (`npm test -- --selectProjects integration`, a folder, a name pattern). Arguments that name test
 * files exactly are split between the two runs here; any other selection runs twice
 * (JEST_ALONE_FILES=exclude, then =only), and `check` is set: it fails when neither run found a
 * test. A run that is already one at a time (`-i`, `-w 1`), or `--json` printed on stdout, is one
 * run, one file at a time. Each run: `{ args, env, part }`, `part` naming the file of its JSON
 * results when they are needed (to merge into `--outputFile`, or for `check`).
 */
export function planTiers(
  args,
  aloneFiles,
  { workers = os.availableParallelism(), isFile = (file) => existsSync(file) && statSync(file).isFile() } = {},
) {
  const { options, paths } = splitJestArguments(args);
  const workerOptions = options.filter(([option]) => WORKER_OPTION.test(option));
  const serial = workerOptions.some(
    ([option, value]) => /^(-i|--runInBand|--run-in-band)$/.test(option) || /=1$/.test(option) || value === "1",
  );
  const outputFile = outputFileOf(options);
  // Listing, showing the configuration and the like run no test: one run as asked.
  if (options.some(([option]) => NO_TEST_RUN.test(option)))
    return { runs: [{ args, env: {}, part: undefined }], outputFile: undefined, check: false };
  if (serial || (options.flat().includes("--json") && outputFile === undefined))
    return { runs: [{ args: serial ? args : [...args, "--maxWorkers=1"], env: {}, part: undefined }], outputFile: undefined, check: false };

  const kept = options.filter(([option]) => !WORKER_OPTION.test(option) && !option.startsWith("--outputFile")).flat();
  const parallel = workerOptions.length ? workerOptions.flat() : [`--maxWorkers=${workers}`];
  const parts = ["rest", "alone"].map((name) => path.join(root, ".tmp", `jest-${process.pid}-${name}.json`));
  // Paths first: after an array option (--selectProjects a b) jest would read them as its values.
  const run = (these, extra, env, part) => ({
    args: [...these, ...kept, ...extra, ...(part ? ["--json", `--outputFile=${part}`] : [])],
    env,
    part,
  });
  const files = paths.map((p) => path.resolve(root, p));
  if (files.length > 0 && files.every(isFile)) {
    const alone = new Set(aloneFiles.map((file) => path.join(root, file)));
    const rest = files.filter((file) => !alone.has(file)).map((file) => path.relative(root, file));
    const lone = files.filter((file) => alone.has(file)).map((file) => path.relative(root, file));
    const runs = [
      ...(rest.length ? [run(rest, parallel, {}, outputFile && parts[0])] : []),
      ...(lone.length ? [run(lone, ["--maxWorkers=1"], {}, outputFile && parts[1])] : []),
    ];
    return { runs, outputFile, check: false };
  }
  return {
    runs: [
      run(paths, [...parallel, "--passWithNoTests"], { JEST_ALONE_FILES: "exclude" }, parts[0]),
      run(paths, ["--maxWorkers=1", "--passWithNoTests"], { JEST_ALONE_FILES: "only" }, parts[1]),
    ],
    outputFile,
    check: true,
  };
}

/**
 * Runs jest on `args` as planTiers plans it, with `env` over this process's environment; with
 * `--outputFile`, the runs' results are merged into that file. Returns the exit status: 0 when
 * every run passed (and, for a selection by pattern, found a test).
 */
export async function runInTiers(args, env = {}) {
  // jest.config.ts, as jest reads it (TypeScript, through tsx).
  const { tsImport } = await import("tsx/esm/api");
  const { ALONE_FILES } = await tsImport(pathToFileURL(path.join(root, "jest.config.ts")).href, import.meta.url);
  const plan = planTiers(args, ALONE_FILES);
  const done = plan.runs.map((run) => {
    const status = runJest(run.args, { ...env, ...run.env });
    return { status, results: run.part ? readResults(run.part) : null };
  });
  if (plan.check && done.every((r) => r.status === 0) && done.reduce((n, r) => n + (r.results?.numTotalTestSuites ?? 0), 0) === 0) {
    process.stderr.write(`No tests found for: ${args.join(" ") || "(everything)"}\n`);
    return 1;
  }
  if (plan.outputFile) writeFileSync(plan.outputFile, `${JSON.stringify(mergeResults(done.map((r) => r.results)))}\n`);
  return done.find((r) => r.status !== 0)?.status ?? 0;
}

/** The file named by `--outputFile FILE` or `--outputFile=FILE`, if any. */
function outputFileOf(options) {
  const option = options.find(([name]) => name === "--outputFile" || name.startsWith("--outputFile="));
  if (!option) return undefined;
  return option[0].includes("=") ? option[0].slice("--outputFile=".length) : option[1];
}

/** A part written by jest --json, or null when the run wrote none (it crashed); the file is removed. */
function readResults(file) {
  if (!existsSync(file)) return null;
  const results = JSON.parse(readFileSync(file, "utf8"));
  rmSync(file);
  return results;
}

/** jest --json results of the runs as one: counts summed, test results concatenated; a missing part fails it. */
function mergeResults(parts) {
  const runs = parts.filter(Boolean);
  const sum = (key) => runs.reduce((total, r) => total + (r[key] ?? 0), 0);
  const counts = Object.keys(runs[0] ?? {}).filter((key) => key.startsWith("num"));
  return {
    ...Object.fromEntries(counts.map((key) => [key, sum(key)])),
    startTime: Math.min(...runs.map((r) => r.startTime)),
    success: runs.length === parts.length && runs.every((r) => r.success),
    testResults: runs.flatMap((r) => r.testResults),
  };
}
