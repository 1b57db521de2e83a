import path from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess } from "@mailhooks/processes";

/**
 * `npm test` on a machine without the browser its browser tests need stops before the first
 * test with one line saying what to install (scripts/chromium.ts; README, "The two commands").
 * A CHROMIUM_PATH that names nothing is such a machine, even as root with apt-get: a path given
 * on purpose is never replaced by an installed package.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

test("npm test with no browser stops before the first test with one line naming what to install", async () => {
  const { code, stdout, stderr } = await runProcess(process.execPath, [path.join(root, "scripts/test.mjs")], {
    cwd: root,
    env: { NODE_OPTIONS: "", CHROMIUM_PATH: "/nowhere/chromium" },
    timeoutMs: 60_000,
  });
  expect({ code, stdout, stderr: stderr.trim().split("\n") }).toEqual({
    code: 1,
    stdout: "",
    stderr: [
      "npm test: the dashboard's browser tests need a Chromium: CHROMIUM_PATH=/nowhere/chromium is not an executable file: " +
        "install Chromium (Debian/Ubuntu: apt-get install chromium; macOS: brew install --cask chromium) or set CHROMIUM_PATH to a Chromium or Chrome executable",
    ],
  });
});
