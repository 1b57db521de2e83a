import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { colourFor } from "./index.js";

/**
 * LOG_FORMAT=pretty colours the level only on a terminal: a log written to a file or a pipe
 * carries no ANSI escape codes (docs/configuration.md, LOG_FORMAT).
 */
const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const ESCAPE = "\u001b[";

test("pretty logs piped to another program (or a file) carry no colour codes, on stdout and stderr", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "logger-colour-"));
  try {
    const program = path.join(dir, "log.ts");
    writeFileSync(
      program,
      [
        `import { configureLogger, getLogger } from ${JSON.stringify(path.join(here, "index.ts"))};`,
        'configureLogger({ level: "info", format: "pretty" });',
        'getLogger("demo").info("to stdout");',
        'getLogger("demo").warn("to stderr");',
        "",
      ].join("\n"),
    );
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: "" };
    delete env.NO_COLOR;
    delete env.FORCE_COLOR;
    // Its stdout and stderr are pipes to this process, as a file or another program would be.
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [require.resolve("tsx/cli"), program], { env });
    expect(stdout).toMatch(/ info \[demo\] to stdout\n$/);
    expect(stderr).toMatch(/ warn \[demo\] to stderr\n$/);
    expect(stdout + stderr).not.toContain(ESCAPE);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("colour only where the level's stream is a terminal, and never with NO_COLOR", () => {
  const streams = (stdout: boolean, stderr: boolean) => ({ stdout: { isTTY: stdout }, stderr: { isTTY: stderr } });
  expect(colourFor("info", {}, streams(true, false))).toBe(true);
  expect(colourFor("info", {}, streams(false, true))).toBe(false);
  expect(colourFor("warn", {}, streams(false, true))).toBe(true);
  expect(colourFor("error", {}, streams(true, false))).toBe(false);
  expect(colourFor("info", { NO_COLOR: "1" }, streams(true, true))).toBe(false);
});
