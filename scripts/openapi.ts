/**
 * `npm run openapi`: rewrites `openapi.json` at the repository root from the API's zod schemas
 * (apps/api/src/openapi). Run it after changing a route, a request schema or a view; the test
 * apps/api/src/openapi/document.test.ts fails while the committed file differs. The typed client
 * (packages/api-client) is generated from that file. `--help` and a usage error are answered
 * before anything is written.
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createCommand } from "@mailhooks/command-line";

const target = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "openapi.json");

await createCommand({
  name: "npm run -s openapi --",
  description:
    "Rewrite openapi.json (the OpenAPI 3.1 document of the API, at the repository root) from the API's schemas. Run it after changing a route or a schema: a test fails while the committed file is stale.",
  examples: ["npm run openapi"],
})
  .allowExcessArguments(false)
  .action(async () => {
    // Loaded only now: --help and usage errors need none of the API's modules.
    const { openApiFileText } = await import("../apps/api/src/openapi/document.js");
    await writeFile(target, openApiFileText());
    console.log(`wrote ${path.relative(process.cwd(), target) || target}`);
  })
  .parseAsync(process.argv);
