// `npm start`: the built API and one dispatcher together, for a single machine. Signals are
// passed on to both; when either exits, the other is stopped and its exit code is kept.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// The commands of `npm run start:api` and `npm run start:dispatcher` (their Node flags included),
// run directly so that signals reach the processes.
const { scripts } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
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
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    exiting = true;
    for (const child of children) if (child.exitCode === null) child.kill(signal);
  });
}
