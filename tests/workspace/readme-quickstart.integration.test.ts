import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import getPort from "get-port";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import { waitUntil } from "../support/wait.js";

/**
 * The README's "Five minutes to a verified delivery", run as written: every `sh` block of the
 * section, in order, in one bash session at the repository's root, as a newcomer pastes them.
 * The service it starts (`npm start`: a build, then the API and a dispatcher), the receiver
 * (examples/verify-webhook.ts) and the curl calls are the real ones. Only the environment differs
 * from a newcomer's: this run's test database, Redis, a queue prefix and free ports (PORT, which
 * the section reads, and the admin and metrics listeners), so that nothing of another run is
 * touched.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The section's `sh` blocks, in order. */
function quickStartBlocks(): string[] {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const start = readme.indexOf("\n## Five minutes to a verified delivery\n");
  expect(start).toBeGreaterThan(0);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

test("the README's quick start runs as written: a webhook, a test request and an event arrive verified at the receiver", async () => {
  const blocks = quickStartBlocks();
  expect(blocks.length).toBeGreaterThanOrEqual(5);
  const [port, adminPort, metricsPort] = [await getPort(), await getPort(), await getPort()];
  // Job control on, as in the terminal a newcomer pastes into: each background command is a job
  // of its own, which `kill %1 %2` stops whole; and, should the blocks fail or hang, every job
  // is stopped when the shell ends.
  const script = [
    "set -euo pipefail -m",
    "trap 'for job in $(jobs -p); do kill -- -$job 2> /dev/null || true; done' EXIT",
    "trap 'exit 143' TERM",
    ...blocks,
  ].join("\n");
  // A process group of its own: what the blocks start in the background goes with it.
  const bash = spawn("bash", ["-c", script], {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      NODE_OPTIONS: "",
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      METRICS_PORT: String(metricsPort),
      DATABASE_URL: testDatabaseUrl(),
      REDIS_URL: testRedisUrl(),
      QUEUE_PREFIX: `quickstart-${randomUUID().slice(0, 8)}`,
    },
  });
  let output = "";
  bash.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  bash.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let timer: NodeJS.Timeout | undefined;
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      timer = setTimeout(() => {
        bash.kill("SIGTERM");
        reject(new Error(`the quick start did not end within 300 s; output:\n${output}`));
      }, 300_000);
      bash.once("close", resolve);
    });
    expect({ code, output }).toEqual({ code: 0, output: expect.any(String) });
  } finally {
    clearTimeout(timer);
    try {
      process.kill(-bash.pid!, "SIGKILL");
    } catch {
      // the group has ended
    }
  }
  // The receiver printed each verified event once: the test request and the event.
  expect(output).toMatch(/^dlv_[0-9a-f]{32} webhook\.test $/m);
  expect(output).toMatch(/^evt_[0-9a-f]{32} message\.sent <42@mail\.example\.com>$/m);
  // The deliveries as the service recorded them: the creation's test request found nothing
  // listening, the test request and the event were answered 204.
  const deliveries = JSON.parse(output.split("\n").find((line) => line.startsWith('{"data":[')) ?? "null") as {
    data: { trigger: string; response_status: number | null; error: string | null; event_id: string | null }[];
  } | null;
  expect(deliveries?.data.map((d) => [d.trigger, d.response_status, d.error]).sort()).toEqual(
    [
      ["initial", 204, null],
      ["test", 204, null],
      ["test", null, "connection_error"],
    ].sort(),
  );
  // And a sign-in link to the API on PORT; then `kill %1 %2` stopped the service.
  expect(output).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/dashboard/sign-in/[0-9a-f]{12}[A-Za-z0-9_-]{43}$`, "m"));
  await waitUntil(
    () =>
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        () => "answers",
        () => "gone",
      ),
    (state) => state === "gone",
  );
}, 320_000);
