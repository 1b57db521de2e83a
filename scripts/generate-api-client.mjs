// Generates the typed client's types (packages/api-client/src/generated/openapi.ts) from the
// committed OpenAPI document (openapi.json at the root) with openapi-typescript. Run by the root
// postinstall and by `npm run build`, so that a fresh clone has the client after `npm ci` and a
// build always compiles the document that is committed. The folder is not committed.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const source = path.join(root, "openapi.json");
const target = path.join(root, "packages/api-client/src/generated/openapi.ts");

const ast = await openapiTS(JSON.parse(await readFile(source, "utf8")), { silent: true });
const text = `// Generated from openapi.json by scripts/generate-api-client.mjs (npm run build, postinstall): do not edit.\n\n${astToString(ast)}`;
await mkdir(path.dirname(target), { recursive: true });
// Rewritten only when it changes, so that tsc -b sees an unchanged file as up to date.
const current = await readFile(target, "utf8").catch(() => null);
if (current !== text) await writeFile(target, text);
