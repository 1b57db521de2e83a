/**
 * The Chromium that the browser tests drive through playwright-core (never a browser downloaded
 * by Playwright): `CHROMIUM_PATH` when set, else the usual names on PATH, else the usual install
 * paths. `npm test` (scripts/prepare-tests.ts) looks for it before the first test; when there is
 * none and Debian's apt-get runs as root it installs the `chromium` package, as `.ci/run` does;
 * elsewhere it stops with one line saying what to install (`INSTALL_HINT`).
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { findOnPath } from "@mailhooks/processes";

/** Executable names of Chromium and Chrome, looked for on PATH in this order. */
export const CHROMIUM_NAMES = ["chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome"];

/** Where packages install them, tried after PATH (Debian/Ubuntu, snap, macOS). */
export const CHROMIUM_PATHS = [
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/snap/bin/chromium",
  "/usr/bin/google-chrome-stable",
  "/usr/bin/google-chrome",
  "/Applications/Chromium.app/Contents/MacOS/Chromium",
  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
];

/** What to do when no browser is found (one line, no full stop at its end). */
export const INSTALL_HINT =
  "install Chromium (Debian/Ubuntu: apt-get install chromium; macOS: brew install --cask chromium) or set CHROMIUM_PATH to a Chromium or Chrome executable";

/** A browser found, or why there is none. */
export type ChromiumLookup = { path: string } | { problem: string };

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The Chromium to use: `env.CHROMIUM_PATH` when set (and a problem when it names no executable
 * file: a path given on purpose is never silently replaced), else the first of `CHROMIUM_NAMES`
 * on `env.PATH`, else the first of `paths` that exists.
 */
export function findChromium(env: NodeJS.ProcessEnv = process.env, paths: string[] = CHROMIUM_PATHS): ChromiumLookup {
  const named = env.CHROMIUM_PATH;
  if (named !== undefined && named !== "") {
    return isExecutableFile(named) ? { path: named } : { problem: `CHROMIUM_PATH=${named} is not an executable file: ${INSTALL_HINT}` };
  }
  for (const name of CHROMIUM_NAMES) {
    const found = findOnPath(name, env.PATH ?? "");
    if (found && isExecutableFile(found)) return { path: found };
  }
  const found = paths.find(isExecutableFile);
  return found
    ? { path: found }
    : { problem: `no Chromium found (CHROMIUM_PATH is unset; looked on PATH and in the usual places): ${INSTALL_HINT}` };
}

/**
 * What `npm test` does about the browser: `use` the one found; `install` Debian's `chromium`
 * package when none was found by the search (not when CHROMIUM_PATH names nothing), apt-get is on
 * PATH and the process is root; else `stop`.
 */
export function browserStep(
  lookup: ChromiumLookup,
  machine: { root: boolean; aptGet: boolean; chromiumPathSet: boolean },
): "use" | "install" | "stop" {
  if ("path" in lookup) return "use";
  return machine.root && machine.aptGet && !machine.chromiumPathSet ? "install" : "stop";
}

/**
 * Makes sure a Chromium is there before the first test: finds it, or installs Debian's package
 * (`apt-get update` then `apt-get install -y chromium`, output shown), or prints one line saying
 * what to install. Returns the browser's path, or null when the tests cannot have one.
 */
export function ensureChromium(env: NodeJS.ProcessEnv = process.env): { path: string } | { problem: string } {
  const lookup = findChromium(env);
  const aptGet = findOnPath("apt-get", env.PATH ?? "");
  const step = browserStep(lookup, {
    root: process.getuid?.() === 0,
    aptGet: aptGet !== null,
    chromiumPathSet: Boolean(env.CHROMIUM_PATH),
  });
  if (step !== "install") return lookup;
  console.error("npm test: no Chromium for the browser tests: installing Debian's chromium package (apt-get install chromium)");
  const aptEnv = { ...env, DEBIAN_FRONTEND: "noninteractive" };
  const updated = spawnSync(aptGet!, ["update", "-qq"], { stdio: "inherit", env: aptEnv });
  const installed = updated.status === 0 && spawnSync(aptGet!, ["install", "-y", "-qq", "chromium"], { stdio: "inherit", env: aptEnv });
  if (!installed || installed.status !== 0) return { problem: `apt-get install chromium failed: ${INSTALL_HINT}` };
  return findChromium(env);
}
