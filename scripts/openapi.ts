/**
 * `npm run openapi`: rewrites `openapi.json` at the repository root from the API's zod schemas
 * (apps/api/src/openapi). Run it after changing a route, a request schema or a view; the test
 * apps/api/src/openapi/document.test.ts fails while the committed file differs. The typed client
 * (packages/api-client) is generated from that file.
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { openApiFileText } from "../apps/api/src/openapi/document.js";

const target = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "openapi.json");
await writeFile(target, openApiFileText());
console.log(`wrote ${path.relative(process.cwd(), target) || target}`);
