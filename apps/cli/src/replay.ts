/**
 * `npm run -s replay -- --since ISO --until ISO [--inbox ID] [--event-type T] [--status failed]
 *   [--target-url URL] [--webhook-id ID] [--pause-ms 100] [--dry-run]`
 * Reads API_URL (default http://127.0.0.1:3000) and API_KEY from the environment. Shows a
 * progress bar on a terminal and one line per event otherwise; exits 1 when a replay failed.
 */
import { parseArgs } from "node:util";
import cliProgress from "cli-progress";
import { z } from "zod";
import { bulkReplay, type BulkReplayReporter } from "./bulk-replay.js";

const iso = z.iso.datetime({ offset: true, message: "must be an ISO 8601 timestamp" });
const schema = z.object({
  API_URL: z.url({ message: "API_URL must be a URL" }).default("http://127.0.0.1:3000"),
  API_KEY: z.string({ message: "API_KEY is required" }).min(1, "API_KEY is required"),
  since: iso,
  until: iso,
  inbox: z.string().min(1).optional(),
  "event-type": z.string().min(1).optional(),
  status: z.enum(["pending", "delivered", "failed"]).optional(),
  "target-url": z.string().startsWith("https://", "--target-url must be an https:// URL").optional(),
  "webhook-id": z.string().min(1).optional(),
  "pause-ms": z.coerce.number().int().min(0).default(100),
  "dry-run": z.boolean().default(false),
});

function plainReporter(): BulkReplayReporter {
  let done = 0;
  let total = 0;
  return {
    start: (n) => {
      total = n;
      console.log(`${n} matching event(s)`);
    },
    item: (id, outcome, detail) => console.log(`[${++done}/${total}] ${outcome.padEnd(8)} ${id} ${detail}`),
    stop: () => undefined,
  };
}

function barReporter(): BulkReplayReporter {
  const bar = new cliProgress.SingleBar({ format: "replaying [{bar}] {value}/{total} | {eta_formatted} left | last: {last}", hideCursor: true }, cliProgress.Presets.shades_classic);
  const failures: string[] = [];
  return {
    start: (n) => bar.start(n, 0, { last: "-" }),
    item: (id, outcome, detail) => {
      if (outcome === "failed") failures.push(`failed   ${id} ${detail}`);
      bar.increment(1, { last: `${outcome} ${id}` });
    },
    stop: () => {
      bar.stop();
      // Listed once the bar is gone, so that no failure scrolls away under it.
      for (const line of failures) console.log(line);
    },
  };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      since: { type: "string" },
      until: { type: "string" },
      inbox: { type: "string" },
      "event-type": { type: "string" },
      status: { type: "string" },
      "target-url": { type: "string" },
      "webhook-id": { type: "string" },
      "pause-ms": { type: "string" },
      "dry-run": { type: "boolean" },
    },
  });
  const parsed = schema.safeParse({ ...values, API_URL: process.env.API_URL || undefined, API_KEY: process.env.API_KEY });
  if (!parsed.success) {
    for (const issue of parsed.error.issues) console.error(`replay: ${issue.path.join(".") || "input"}: ${issue.message}`);
    return 2;
  }
  const o = parsed.data;
  const summary = await bulkReplay(
    {
      apiUrl: o.API_URL,
      apiKey: o.API_KEY,
      since: o.since,
      until: o.until,
      inbox: o.inbox,
      eventType: o["event-type"],
      status: o.status,
      targetUrl: o["target-url"],
      webhookId: o["webhook-id"],
      pauseMs: o["pause-ms"],
      dryRun: o["dry-run"],
    },
    process.stdout.isTTY ? barReporter() : plainReporter(),
  );
  const verb = o["dry-run"] ? "would replay" : "replayed";
  console.log(`summary: matched ${summary.matched}, ${verb} ${o["dry-run"] ? summary.matched : summary.replayed}, skipped as expired ${summary.skippedExpired}, failed ${summary.failed}`);
  return summary.failed > 0 ? 1 : 0;
}

main().then(
  (code) => (process.exitCode = code),
  (error: Error) => {
    console.error(`replay: ${error.message}`);
    process.exitCode = 1;
  },
);
