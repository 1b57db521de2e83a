// Runs `prisma generate` (postinstall). The Prisma CLI insists on locating its native schema
// engine even though generate never runs it, and the engine cannot be downloaded everywhere:
// pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing file satisfies the check offline.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const cli = require.resolve("prisma/build/index.js");
const env = { ...process.env, PRISMA_HIDE_UPDATE_MESSAGE: "1" };
env.PRISMA_SCHEMA_ENGINE_BINARY ??= process.execPath;
const result = spawnSync(process.execPath, [cli, "generate"], { stdio: "inherit", env });
process.exit(result.status ?? 1);
