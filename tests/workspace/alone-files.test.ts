import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ALONE_FILES, INTEGRATION_SUFFIX, STACK_FOLDERS } from "../../jest.config.js";

/**
 * `npm test` runs ALONE_FILES (jest.config.ts) one at a time after every other file: a name there
 * that no longer exists (a file renamed) would let its tests run beside others unnoticed, and one
 * outside the integration tier would run in the first, parallel jest run anyway.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

test("every file that must run alone exists and is an integration test", () => {
  expect(ALONE_FILES.length).toBeGreaterThan(0);
  for (const file of ALONE_FILES) {
    expect([file, existsSync(path.join(root, file))]).toEqual([file, true]);
    const inStackFolder = STACK_FOLDERS.some((folder) => file.startsWith(`tests/${folder}/`) && file.endsWith(".test.ts"));
    expect([file, inStackFolder || file.endsWith(INTEGRATION_SUFFIX)]).toEqual([file, true]);
  }
});
