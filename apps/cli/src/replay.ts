/**
 * `npm run -s replay -- --since ISO --until ISO [--inbox ID] [--event-type T] [--status failed]
 *   [--target-url URL] [--webhook-id ID] [--pause-ms 100] [--dry-run]` (docs/api.md, "Bulk
 * replay"): bulk replay through the API, one call per event (see bulk-replay.ts). Reads API_URL
 * (default http://127.0.0.1:3000) and API_KEY from the environment. Shows a progress bar on a
 * terminal and one line per event otherwise; exits 1 when a replay failed (or, with --dry-run,
 * would fail), 2 on a usage error.
 */
import cliProgress from "cli-progress";
import { z } from "zod";
import { EVENT_TYPES } from "@mailhooks/events";
import { createCommand, USAGE_ERROR } from "@mailhooks/command-line";
import { bulkReplay, type BulkReplayReporter, type Outcome } from "./bulk-replay.js";

const iso = z.iso.datetime({ offset: true, message: "must be an ISO 8601 timestamp" });
const environment = z.object({
  API_URL: z.url({ message: "API_URL must be a URL" }).default("http://127.0.0.1:3000"),
  API_KEY: z.string({ message: "API_KEY is required" }).min(1, "API_KEY is required"),
});
const optionsSchema = z.object({
  since: iso,
  until: iso,
  inbox: z.string().min(1).optional(),
  eventType: z.enum(EVENT_TYPES).optional(),
  status: z.enum(["pending", "delivered", "failed"]).optional(),
  targetUrl: z.string().startsWith("https://", "--target-url must be an https:// URL").optional(),
  webhookId: z.string().min(1).optional(),
  pauseMs: z.coerce.number().int().min(0).default(100),
  dryRun: z.boolean().default(false),
});

/** How an outcome is shown: what happened, or with --dry-run what would. */
const WORDS: Record<Outcome, [done: string, dryRun: string]> = {
  replayed: ["replayed", "would replay"],
  expired: ["expired", "expired"],
  failed: ["failed", "would fail"],
};
const word = (outcome: Outcome, dryRun: boolean) => WORDS[outcome][dryRun ? 1 : 0];

function plainReporter(dryRun: boolean): BulkReplayReporter {
  let done = 0;
  let total = 0;
  const width = dryRun ? 12 : 8;
  return {
    start: (n) => {
      total = n;
      console.log(`${n} matching event(s)`);
    },
    item: (id, outcome, detail) => console.log(`[${++done}/${total}] ${word(outcome, dryRun).padEnd(width)} ${id} ${detail}`),
    stop: () => undefined,
  };
}

function barReporter(dryRun: boolean): BulkReplayReporter {
  const bar = new cliProgress.SingleBar(
    { format: "replaying [{bar}] {value}/{total} | {eta_formatted} left | last: {last}", hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  const failures: string[] = [];
  return {
    start: (n) => bar.start(n, 0, { last: "-" }),
    item: (id, outcome, detail) => {
      if (outcome === "failed") failures.push(`${word(outcome, dryRun)} ${id} ${detail}`);
      bar.increment(1, { last: `${word(outcome, dryRun)} ${id}` });
    },
    stop: () => {
      bar.stop();
      // Listed once the bar is gone, so that no failure scrolls away under it.
      for (const line of failures) console.log(line);
    },
  };
}

/** `issues` as `replay: <what>: <why>` lines (flags by their command-line name). */
function reportIssues(issues: z.core.$ZodIssue[]): void {
  const flag = (key: PropertyKey | undefined) =>
    key === undefined
      ? "input"
      : /^[A-Z_]+$/.test(String(key))
        ? String(key)
        : `--${String(key).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  for (const issue of issues) console.error(`replay: ${flag(issue.path[0])}: ${issue.message}`);
}

const program = createCommand({
  name: "npm run -s replay --",
  description:
    "Bulk replay the way the specification describes it: list the matching events through the API, then replay each one with its own call, --pause-ms apart. A failed call is reported and the run goes on. --since and --until are required. --dry-run replays nothing: it reads each event and tells what its replay call would answer, refusals included.",
  examples: [
    "API_KEY=whk_... npm run -s replay -- --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z --status failed",
    "API_KEY=whk_... npm run -s replay -- --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z --webhook-id wh_... --target-url https://staging.example.com/hooks --dry-run",
  ],
  environment,
})
  .usage("--since <ISO> --until <ISO> [options]")
  .requiredOption("--since <ISO>", "required: only events created at or after this time (ISO 8601)")
  .requiredOption("--until <ISO>", "required: only events created before this time (ISO 8601)")
  .option("--inbox <ID>", "only events of this inbox")
  .option("--event-type <TYPE>", `only events of this kind (${EVENT_TYPES.join(", ")})`)
  .option("--status <STATUS>", "only events in this status (pending, delivered, failed)")
  .option(
    "--target-url <URL>",
    "replay to this https:// URL instead of the webhooks' own, signed with the secret of the event's webhook (an event with several needs --webhook-id)",
  )
  .option("--webhook-id <ID>", "replay only to this webhook (with --target-url: the webhook whose secret signs)")
  .option("--pause-ms <MS>", "pause between two replay calls, in ms", "100")
  .option("--dry-run", "replay nothing: tell what each replay call would answer (and exit 1 if one would fail)")
  .action(async (flags: Record<string, unknown>) => {
    const env = environment.safeParse({ API_URL: process.env.API_URL || undefined, API_KEY: process.env.API_KEY });
    const parsed = optionsSchema.safeParse(flags);
    if (!env.success || !parsed.success) {
      reportIssues([...(env.error?.issues ?? []), ...(parsed.error?.issues ?? [])]);
      process.exitCode = USAGE_ERROR;
      return;
    }
    const o = parsed.data;
    const summary = await bulkReplay(
      { apiUrl: env.data.API_URL, apiKey: env.data.API_KEY, ...o },
      process.stdout.isTTY ? barReporter(o.dryRun) : plainReporter(o.dryRun),
    );
    console.log(
      `summary: matched ${summary.matched}, ${word("replayed", o.dryRun)} ${summary.replayed}, skipped as expired ${summary.skippedExpired}, ${word("failed", o.dryRun)} ${summary.failed}`,
    );
    process.exitCode = summary.failed > 0 ? 1 : 0;
  });

program.parseAsync(process.argv).catch((error: Error) => {
  console.error(`replay: ${error.message}`);
  process.exitCode = 1;
});
