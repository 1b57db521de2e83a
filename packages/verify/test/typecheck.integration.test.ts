import path from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess } from "@mailhooks/processes";

// jest compiles without type checking, so two tsc runs prove what the types promise:
// - tsconfig.web-check.json: the Web Crypto entry points (web, hono, next) compile with the DOM
//   library and no Node types at all, so they import nothing from Node;
// - tsconfig.typecheck.json: the tests and the example compile against the real express,
//   fastify and hono types, so the structural adapter types fit the frameworks.
const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tsc = path.resolve(packageDir, "../../node_modules/.bin/tsc");

describe("types", () => {
  it.concurrent.each(["tsconfig.web-check.json", "tsconfig.typecheck.json"])("%s compiles without errors", async (config) => {
    // tsc prints its errors on stdout, and exits 2 then: its stdout is the verdict.
    const result = await runProcess(tsc, ["-p", config], { cwd: packageDir, env: { NODE_OPTIONS: "" } });
    expect(result.stdout).toBe("");
  });
});
