import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { apiConfigSchema, dispatcherConfigSchema } from "@mailhooks/config";

/**
 * docs/configuration.md lists every variable the service reads (packages/config's schemas of the
 * API and the dispatcher) in its tables of the service, and no variable they do not read.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

test("docs/configuration.md documents exactly the variables of packages/config", () => {
  const page = readFileSync(path.join(root, "docs/configuration.md"), "utf8");
  const service = page.slice(0, page.indexOf("\n## Beside the service\n"));
  const documented = new Set(
    service
      .split("\n")
      .filter((line) => line.startsWith("| `"))
      .flatMap((line) => [...line.split(" | ")[0].matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1])),
  );
  const read = new Set([...Object.keys(apiConfigSchema.shape), ...Object.keys(dispatcherConfigSchema.shape)]);
  expect([...read].filter((name) => !documented.has(name)).sort()).toEqual([]);
  expect([...documented].filter((name) => !read.has(name)).sort()).toEqual([]);
});
