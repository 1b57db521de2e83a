/**
 * `npm run bench [-- --quick | --grown | --help]` (bench/README.md): the whole pipeline
 * measured beside the floor of its own stack, in one run, on this machine. Builds, prepares the
 * database (empty, or the seeded grown one), starts the built API and one dispatcher as real
 * processes, the bare Express route, the receiver (this process) and the load generator (its own
 * process), runs every throughput phase once per repetition (interleaved, so that a change of
 * machine load touches all of them alike), then the latency phases, then the neighbour phase (on
 * processes of its own: bench/neighbour.ts), and writes one table and bench/results/latest.json. bench/README.md explains each figure.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { migrate, MIGRATIONS_DIR } from "@mailhooks/db";
import { runProcess } from "@mailhooks/processes";
import { parseBenchArgs } from "./args.js";
import { dropDatabase, prepareGrownDatabase, type SeedReport } from "./grown/seed.js";
import { explainListQueries, SLOW_BUFFERS, type ExplainReport } from "./grown/explain.js";
import { timeRetentionPurge, type PurgeReport } from "./grown/purge.js";
import { neighbours } from "./neighbour.js";
import * as phase from "./phases.js";
import { fail, log, stopChildren } from "./processes.js";
import {
  compareWithEmpty,
  headline,
  printRows,
  printTable,
  printTargets,
  targets,
  type Figures,
  type Headline,
  type Target,
} from "./report.js";
import { CONCURRENCY, RETRY_DELAY_MS, startBench, UNDELIVERED_SUFFIX } from "./setup.js";
import { figure } from "./stats.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = parseBenchArgs(process.argv.slice(2));
const { sizes } = args;
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const EMPTY_URL = process.env.BENCH_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_bench";
const GROWN_URL = (() => {
  const url = new URL(EMPTY_URL);
  url.pathname = "/webhooks_bench_grown";
  return url.toString();
})();
const MODE = `${args.grown ? "grown" : "empty"}${args.quick ? "-quick" : ""}`;

async function recreateDatabase(databaseUrl: string): Promise<void> {
  await dropDatabase(databaseUrl);
  await migrate(databaseUrl, MIGRATIONS_DIR);
}

/** The batch phase's work, which no dispatcher will ever take (see setup.ts), goes. */
async function forgetUndelivered(databaseUrl: string, prefix: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(`DELETE FROM work_items WHERE queue_prefix = $1`, [`${prefix}${UNDELIVERED_SUFFIX}`]);
  await client.end();
}

/** A setting of the PostgreSQL of `databaseUrl` (SHOW). */
async function postgresSetting(databaseUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<Record<string, string>>(`SHOW ${name}`)).rows[0][name];
  } finally {
    await client.end();
  }
}

async function main() {
  const startedAt = Date.now();
  log(
    `${MODE} run on ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  log("building");
  const built = await runProcess(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-b"], { cwd: ROOT });
  if (built.code !== 0) fail(`build failed:\n${built.stdout}${built.stderr}`);

  let seed: SeedReport | undefined;
  const databaseUrl = args.grown ? GROWN_URL : EMPTY_URL;
  if (args.grown) {
    seed = await prepareGrownDatabase(databaseUrl, { events: args.seedEvents, reseed: args.reseed });
  } else {
    log("preparing an empty database");
    await recreateDatabase(databaseUrl);
  }

  // The work queue's rows are inserted, leased and deleted by the thousand: with autovacuum off,
  // their dead versions pile up for the whole run and every claim reads through them. No production
  // PostgreSQL runs so; the run says when this one does (docs/operations.md, "Running it").
  const autovacuum = await postgresSetting(databaseUrl, "autovacuum");
  if (autovacuum !== "on") log(`PostgreSQL's autovacuum is ${autovacuum}: the queue tables bloat as the run goes, unlike in production`);

  log("starting the receiver, the API, a dispatcher, the bare Express route and the load generator");
  const b = await startBench(ROOT, databaseUrl, REDIS_URL);

  // JIT, connection pools and caches warm; the floor runs in a fresh process each time anyway.
  log("warming up (not measured)");
  await phase.ingest(b, "warm0", args.quick ? 300 : 1_000);
  await phase.batch(b, "warm1", args.quick ? 1_000 : 2_000, sizes.batchSize);

  const samples = {
    bare: [] as phase.ThroughputSample[],
    ingest: [] as phase.IngestSample[],
    batch: [] as phase.BatchSample[],
    floorGot: [] as phase.ThroughputSample[],
    floorUndici: [] as phase.ThroughputSample[],
    burst: [] as phase.BurstSample[],
    fanout: [] as phase.ThroughputSample[],
  };
  const floorRuns: string[] = [];
  const otherRuns = ["warm0"];
  for (let rep = 0; rep < sizes.reps; rep++) {
    const of = `${rep + 1}/${sizes.reps}`;
    samples.bare.push(await phase.calibration(b, `cal${rep}`, sizes.ingest));
    log(`calibration ${of}: bare Express ${Math.round(samples.bare.at(-1)!.rate)} requests/s`);
    samples.ingest.push(await phase.ingest(b, `ing${rep}`, sizes.ingest));
    log(
      `ingest ${of}: ${Math.round(samples.ingest.at(-1)!.rate)} events/s, then drained at ${Math.round(samples.ingest.at(-1)!.drainRate)} deliveries/s`,
    );
    samples.batch.push(await phase.batch(b, `bat${rep}`, sizes.batch, sizes.batchSize));
    log(`batch ${of}: ${Math.round(samples.batch.at(-1)!.rate)} events/s`);
    samples.floorGot.push(await phase.floor(b, `flg${rep}`, "got", sizes.floor));
    samples.floorUndici.push(await phase.floor(b, `flu${rep}`, "undici", sizes.floor));
    floorRuns.push(`flg${rep}`, `flu${rep}`);
    log(
      `floor ${of}: got ${Math.round(samples.floorGot.at(-1)!.rate)}, undici ${Math.round(samples.floorUndici.at(-1)!.rate)} deliveries/s`,
    );
    samples.burst.push(await phase.burst(b, `bur${rep}`, sizes.burst));
    log(
      `burst ${of}: ${Math.round(samples.burst.at(-1)!.rate)} deliveries/s end to end (ingest ${Math.round(samples.burst.at(-1)!.ingestRate)} events/s)`,
    );
    samples.fanout.push(await phase.fanout(b, `fan${rep}`, sizes.fanoutEvents));
    log(`fan-out ${of}: ${Math.round(samples.fanout.at(-1)!.rate)} deliveries/s`);
    otherRuns.push(`ing${rep}`, `bur${rep}`, `fan${rep}`);
  }

  const burstMedian = figure(samples.burst.map((s) => s.rate)).median;
  const pacedRate = sizes.pacedRate ?? Math.max(10, Math.round(burstMedian / 2));
  const pacedSamples: Awaited<ReturnType<typeof phase.paced>>[] = [];
  const retrySamples: Awaited<ReturnType<typeof phase.retryTiming>>[] = [];
  for (let rep = 0; rep < sizes.reps; rep++) {
    pacedSamples.push(await phase.paced(b, `pac${rep}`, pacedRate, sizes.pacedMs));
    const p = pacedSamples.at(-1)!;
    log(
      `paced ${rep + 1}/${sizes.reps} at ${pacedRate}/s: p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms (its request answered in p50 ${p.requestLatencyMs.p50.toFixed(1)} ms, p99 ${p.requestLatencyMs.p99.toFixed(1)} ms)`,
    );
    otherRuns.push(`pac${rep}`);
  }
  for (let rep = 0; rep < sizes.reps; rep++) {
    retrySamples.push(await phase.retryTiming(b, `ret${rep}`, sizes.retries, RETRY_DELAY_MS));
    const r = retrySamples.at(-1)!;
    log(`retry ${rep + 1}/${sizes.reps}: late by p50 ${r.p50.toFixed(0)} ms, p99 ${r.p99.toFixed(0)} ms`);
    otherRuns.push(`ret${rep}`);
  }
  const crossCheck = await phase.crossCheck(b, floorRuns, otherRuns);
  // After the cross-check: its own dispatcher's deliveries (and test events) are not the bench's.
  // Modest beside what this machine delivers now: a rate it cannot sustain would measure its queue.
  const neighbourRate = Math.min(sizes.neighbourRate, Math.max(10, Math.round(burstMedian / 4)));
  const neighbour = await neighbours(b, {
    rate: neighbourRate,
    durationMs: sizes.neighbourMs,
    backlog: sizes.neighbourBacklog,
    arrivalCapMs: sizes.neighbourArrivalCapMs,
  });
  log(
    `neighbours: quiet p99 ${neighbour.quiet.p99.toFixed(1)} ms, loaded p99 ${neighbour.loaded.p99AtLeast ? ">= " : ""}${neighbour.loaded.p99.toFixed(1)} ms (${neighbour.loaded.missing} of ${neighbour.loaded.sent} missing), backlog ${neighbour.backlog}, ${Math.round(neighbour.redisBytesPerWaitingDelivery)} Redis bytes per waiting delivery`,
  );

  log("stopping");
  b.load.close();
  await stopChildren();
  b.receiver.close();
  await forgetUndelivered(databaseUrl, b.prefix);

  let explain: ExplainReport | undefined;
  let purge: PurgeReport | undefined;
  if (args.grown) {
    log("EXPLAIN of the list queries");
    explain = await explainListQueries(databaseUrl);
    purge = await timeRetentionPurge(databaseUrl, seed!);
  }

  const f: Figures = {
    bare: figure(samples.bare.map((s) => s.rate)),
    ingest: figure(samples.ingest.map((s) => s.rate)),
    ingestLatencyP99: figure(samples.ingest.map((s) => s.latencyMs!.p99)),
    drain: figure(samples.ingest.map((s) => s.drainRate)),
    batch: figure(samples.batch.map((s) => s.rate)),
    floorGot: figure(samples.floorGot.map((s) => s.rate)),
    floorUndici: figure(samples.floorUndici.map((s) => s.rate)),
    burst: figure(samples.burst.map((s) => s.rate)),
    burstIngest: figure(samples.burst.map((s) => s.ingestRate)),
    fanout: figure(samples.fanout.map((s) => s.rate)),
    pacedP50: figure(pacedSamples.map((s) => s.p50)),
    pacedP95: figure(pacedSamples.map((s) => s.p95)),
    pacedP99: figure(pacedSamples.map((s) => s.p99)),
    pacedRequestP50: figure(pacedSamples.map((s) => s.requestLatencyMs.p50)),
    pacedRequestP99: figure(pacedSamples.map((s) => s.requestLatencyMs.p99)),
    retryLateP50: figure(retrySamples.map((s) => s.p50)),
    retryLateP99: figure(retrySamples.map((s) => s.p99)),
    rssApiBurst: figure(samples.burst.map((s) => s.peakRssMb.api)),
    rssDispatcherBurst: figure(samples.burst.map((s) => s.peakRssMb.dispatcher)),
    rssApiIngest: figure(samples.ingest.map((s) => s.apiPeakRssMb)),
    rssApiBatch: figure(samples.batch.map((s) => s.apiPeakRssMb)),
    loadCpuShare: figure(
      [...samples.bare, ...samples.ingest, ...samples.batch, ...samples.burst, ...samples.fanout].map((s) => s.loadCpuShare),
    ),
    receiverCpuShare: figure([...samples.floorGot, ...samples.floorUndici, ...samples.burst].map((s) => s.receiverCpuShare ?? 0)),
  };
  const h = headline(f, neighbour, { purgeMs: purge?.purgeMs });

  const resultsDir = path.join(ROOT, "bench/results");
  const emptyFile = path.join(resultsDir, `latest-empty${args.quick ? "-quick" : ""}.json`);
  const empty = args.grown
    ? await readFile(emptyFile, "utf8").then(
        (t) => JSON.parse(t) as Headline,
        () => undefined,
      )
    : undefined;
  const comparison = compareWithEmpty(h, empty);
  const grownTargets: Target[] = [
    ...comparison.targets,
    ...(explain ? [listQueriesTarget(explain)] : []),
    ...(purge
      ? [
          {
            name: "grown: retention purge of 1M payloads < 1 s",
            met: purge.purgeMs < 1_000 && purge.payloadsLeft === 0 && purge.metadataKept,
            value: `${Math.round(purge.purgeMs)} ms (${purge.payloads} payloads)`,
          },
        ]
      : []),
  ];
  const allTargets = targets(h, grownTargets, sizes.pacedRate, neighbour);

  printTable(f, h, neighbour, { mode: MODE, reps: sizes.reps, sizes: { ...sizes }, pacedRate, connections: CONCURRENCY }, crossCheck);
  if (seed) printRows("grown database", seedRows(seed));
  if (explain)
    printRows(
      "list queries on the grown database (EXPLAIN ANALYZE)",
      explain.queries.map((q) => [
        q.name,
        `${q.ok ? "ok    " : `FAILED (${q.verdict})`} ${q.executionMs.toFixed(2)} ms, ${q.sharedBuffers.hit + q.sharedBuffers.read} buffers: ${q.scans.join(", ")}`,
      ]),
    );
  if (purge) {
    printRows("retention purge (the maintenance job's function, once)", [
      ["method", purge.method],
      ["payloads of the expired day before / after", `${purge.payloads} / ${purge.payloadsLeft}`],
      [
        "events, deliveries, audit entries of that day kept",
        purge.metadataKept
          ? `yes (${purge.metadataBefore.events} / ${purge.metadataBefore.deliveries} / ${purge.metadataBefore.auditEntries})`
          : "NO",
      ],
      ["time, ms", purge.purgeMs.toFixed(0)],
    ]);
  }
  if (args.grown)
    printRows(
      empty
        ? `grown beside empty (${path.basename(emptyFile)})`
        : `no ${path.basename(emptyFile)} to compare with: run npm run bench${args.quick ? " -- --quick" : ""} first`,
      comparison.rows,
    );
  printTargets(allTargets);

  let commit = "unknown";
  const git = (args: string[]) => runProcess("git", args, { cwd: ROOT, check: true }).then((r) => r.stdout.trim());
  try {
    commit = await git(["rev-parse", "--short", "HEAD"]);
    if (await git(["status", "--porcelain", "--untracked-files=no"])) commit += "+changes";
  } catch {
    // not a git checkout
  }
  const report = {
    ...h,
    at: new Date().toISOString(),
    commit,
    mode: MODE,
    quick: args.quick,
    grown: args.grown,
    seconds: Math.round((Date.now() - startedAt) / 1000),
    machine: {
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model,
      memoryGb: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      loadAverageAtEnd: os.loadavg(),
      postgresAutovacuum: autovacuum,
    },
    settings: { concurrency: CONCURRENCY, sizes, pacedRate, retryDelayMs: RETRY_DELAY_MS },
    figures: f,
    neighbour,
    crossCheck,
    ...(seed ? { seed } : {}),
    ...(explain ? { explain } : {}),
    ...(purge ? { purge } : {}),
    ...(empty
      ? { comparedWith: { file: path.basename(emptyFile), at: (empty as unknown as { at?: string }).at, rows: comparison.rows } }
      : {}),
    targets: Object.fromEntries(allTargets.map((t) => [t.name, { met: t.met, value: t.value }])),
  };
  await mkdir(resultsDir, { recursive: true });
  const text = `${JSON.stringify(report, null, 2)}\n`;
  await writeFile(path.join(resultsDir, "latest.json"), text);
  await writeFile(path.join(resultsDir, `latest-${MODE}.json`), text);
  console.log(`\nwritten to bench/results/latest.json and latest-${MODE}.json (${report.seconds} s)`);
}

function listQueriesTarget(explain: ExplainReport): Target {
  const failed = explain.queries.filter((q) => !q.ok);
  return {
    name: "grown: list queries keep their index plans",
    met: failed.length === 0,
    value:
      failed.length === 0
        ? `no Seq Scan on events or deliveries, no page over ${SLOW_BUFFERS} buffers`
        : failed.map((q) => `${q.name}: ${q.verdict}`).join("; "),
  };
}

function seedRows(seed: SeedReport): [string, string][] {
  return [
    [
      "events / destinations / deliveries / audit entries",
      `${seed.rows.events} / ${seed.rows.destinations} / ${seed.rows.deliveries} / ${seed.rows.auditEntries}`,
    ],
    ["seeded in this run", seed.reused ? `no (reused the seed of ${seed.seededAt})` : "yes"],
    ["seed time, s", String(seed.seedSeconds)],
    ["database size, GB", seed.databaseGb.toFixed(1)],
  ];
}

main().then(
  () => process.exit(0),
  (error) => fail((error as Error).stack ?? String(error)),
);
