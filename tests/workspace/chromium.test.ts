import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { browserStep, findChromium, INSTALL_HINT } from "../../scripts/chromium.js";

/**
 * Where the browser tests find their Chromium (scripts/chromium.ts): CHROMIUM_PATH, then the usual
 * names on PATH, then the usual install paths; and what `npm test` does when there is none.
 */
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "chromium-lookup-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function executable(name: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, "#!/bin/sh\n");
  chmodSync(file, 0o755);
  return file;
}

describe("findChromium", () => {
  test("CHROMIUM_PATH first, whatever PATH holds", () => {
    const named = executable("my-chrome");
    executable("chromium");
    expect(findChromium({ CHROMIUM_PATH: named, PATH: dir }, [])).toEqual({ path: named });
  });

  test("a CHROMIUM_PATH that names nothing is a problem, never replaced by another browser", () => {
    executable("chromium");
    expect(findChromium({ CHROMIUM_PATH: "/nowhere/chromium", PATH: dir }, [])).toEqual({
      problem: `CHROMIUM_PATH=/nowhere/chromium is not an executable file: ${INSTALL_HINT}`,
    });
  });

  test("then the usual names on PATH, then the usual install paths", () => {
    const onPath = path.join(dir, "chromium");
    expect(findChromium({ PATH: dir }, [])).toEqual({ path: onPath });
    rmSync(onPath);
    const installed = executable("google-chrome-stable-somewhere");
    expect(findChromium({ PATH: dir }, ["/nowhere/chromium", installed])).toEqual({ path: installed });
  });

  test("with none, the problem says what to install", () => {
    const empty = mkdtempSync(path.join(dir, "empty-"));
    const lookup = findChromium({ PATH: empty }, ["/nowhere/chromium"]);
    expect(lookup).toEqual({ problem: expect.stringContaining("apt-get install chromium") });
    expect("problem" in lookup && lookup.problem.split("\n")).toHaveLength(1);
  });
});

describe("browserStep: what npm test does", () => {
  const none = { problem: "none" };
  test("uses a browser found", () => {
    expect(browserStep({ path: "/usr/bin/chromium" }, { root: false, aptGet: false, chromiumPathSet: false })).toBe("use");
  });
  test("installs Debian's package only as root with apt-get, and not when CHROMIUM_PATH names nothing", () => {
    expect(browserStep(none, { root: true, aptGet: true, chromiumPathSet: false })).toBe("install");
    expect(browserStep(none, { root: true, aptGet: true, chromiumPathSet: true })).toBe("stop");
    expect(browserStep(none, { root: false, aptGet: true, chromiumPathSet: false })).toBe("stop");
    expect(browserStep(none, { root: true, aptGet: false, chromiumPathSet: false })).toBe("stop");
  });
});
