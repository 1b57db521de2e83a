// `npm start`: builds, then runs the built API and one dispatcher together, for a single machine.
// Signals are passed on to both; when either exits, the other is stopped and its exit code is
// kept. It runs from source (tsx), so that --help and usage errors are answered before the build
// and before anything starts (docs/operations.md, "Commands").
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createCommand } from "@mailhooks/command-line";
import { apiConfigSchema, dispatcherConfigSchema } from "@mailhooks/config";

createCommand({
  name: "npm start --",
  description:
    "Build, then run the API and one dispatcher together, for a single machine. Signals reach both; when either exits, the other is stopped. Apply the migrations first (npm run db:migrate).",
  examples: ["npm run db:migrate && npm start", "PORT=8080 LOG_FORMAT=pretty npm start"],
  environment: apiConfigSchema.extend(dispatcherConfigSchema.shape),
})
  .action(() => undefined)
  .parse(process.argv);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const built = spawnSync(process.execPath, [path.join(root, "scripts", "build.mjs")], { stdio: "inherit", cwd: root });
if (built.status !== 0) process.exit(built.status ?? 1);

// The commands of `npm run start:api` and `npm run start:dispatcher` (their Node flags included),
// run directly so that signals reach the processes.
const { scripts } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { scripts: Record<string, string> };
const children = ["start:api", "start:dispatcher"].map((name) => {
  const [, ...args] = scripts[name].split(" ");
  return spawn(process.execPath, args, { stdio: "inherit", env: process.env, cwd: root });
});
let exiting = false;
for (const child of children) {
  child.on("exit", (code, signal) => {
    if (!exiting) {
      exiting = true;
      process.exitCode = code ?? (signal ? 1 : 0);
      for (const other of children) if (other !== child && other.exitCode === null) other.kill("SIGTERM");
    }
    if (children.every((c) => c.exitCode !== null || c.signalCode !== null)) process.exit();
  });
}
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    exiting = true;
    for (const child of children) if (child.exitCode === null) child.kill(signal);
  });
}
