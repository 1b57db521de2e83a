/**
 * `npm run bench [-- --quick] [-- --events N]` (CONTRACT.md section 10): the whole pipeline measured beside the
 * floor of its own stack, in one run, on this machine. Starts the built API and one dispatcher
 * as real processes (production settings, LOG_LEVEL=warn), a keep-alive HTTPS receiver that
 * answers at once and timestamps arrivals, and a load generator in its own process; prints one
 * table and writes the same figures to bench/results/latest.json.
 */
import { execSync, fork, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import getPort from "get-port";
import pg from "pg";
import { createPrismaClient, migrate, MIGRATIONS_DIR } from "@mailhooks/db";
import { ensureLocalCertificate } from "@mailhooks/receiver";
import { createApiKey } from "../apps/api/src/services/api-keys.js";
import type { FloorRequest } from "./floor.js";
import type { LoadRequest, LoadResult } from "./load.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values: args } = parseArgs({ options: { quick: { type: "boolean", default: false }, events: { type: "string" } } });
const QUICK = args.quick;
// The full run's burst is 5,000 events (not the 20,000 first planned) so that three repetitions
// of every phase fit in five minutes on this 2-core machine; `--events N` sets another size
// (the floor and fan-out phases scale with it).
const BURST = Number(args.events ?? (QUICK ? 2_000 : 5_000));
const SIZES = QUICK
  ? { reps: 1, burst: BURST, pacedMs: 5_000, fanoutEvents: Math.round(BURST / 4), retries: 50, floor: BURST }
  : { reps: 3, burst: BURST, pacedMs: 20_000, fanoutEvents: Math.round(BURST / 5), retries: 200, floor: BURST };
const CONCURRENCY = { load: 32, dispatcher: 64, pool: 10 };
const RETRY_DELAY_MS = 1_000;
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_bench";
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const PREFIX = `bench-${Date.now()}`;

const now = () => performance.timeOrigin + performance.now();
const log = (line: string) => console.error(`bench: ${line}`);

// ---------- statistics ----------
const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
interface Figure {
  median: number;
  min: number;
  max: number;
}
const figure = (xs: number[]): Figure => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });

// ---------- the receiver ----------
interface Arrival {
  first: number;
  firstAnsweredAt?: number;
  retry?: number;
}
const arrivals = new Map<string, Arrival>();
let arrivalCount = 0;
let okAnswers = 0;
let waiter: (() => void) | null = null;

async function startReceiver(cert: { cert: string; key: string }): Promise<{ url: string; close: () => void }> {
  const server = https.createServer({ cert: cert.cert, key: cert.key, keepAliveTimeout: 120_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = now();
      const body = Buffer.concat(chunks).toString("utf8");
      // The messageId is all the receiver needs; a regex keeps the receiver cheap.
      const messageId = /"messageId":"([^"]+)"/.exec(body)?.[1] ?? `test-${arrivalCount}`;
      arrivalCount++;
      let status = 200;
      const seen = arrivals.get(messageId);
      if (!seen) {
        arrivals.set(messageId, { first: at });
        if (messageId.startsWith("<fail-")) status = 500;
      } else if (seen.retry === undefined) seen.retry = at;
      if (status === 200) okAnswers++;
      res.writeHead(status, { "content-type": "application/json" });
      res.end("{}", () => {
        if (status !== 200) arrivals.get(messageId)!.firstAnsweredAt = now();
      });
      waiter?.();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `https://localhost:${port}/hook`, close: () => server.close() };
}

/** Resolves when `predicate()` holds, checked at every arrival. */
function waitForArrivals(predicate: () => boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      waiter = null;
      reject(new Error(`deliveries did not arrive within ${timeoutMs} ms (${arrivalCount} arrivals)`));
    }, timeoutMs);
    waiter = () => {
      if (!predicate()) return;
      clearTimeout(timer);
      waiter = null;
      resolve();
    };
    waiter();
  });
}

// ---------- processes ----------

/** BENCH_PROFILE=1 writes V8 CPU profiles of the API and the dispatcher to .tmp/profiles. */
/** The Node flags of `npm run start:api` / `start:dispatcher` (package.json), as in production. */
function serviceNodeFlags(script: string): string[] {
  const scripts = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts as Record<string, string>;
  return scripts[script].split(" ").filter((arg) => arg.startsWith("--"));
}
const PROFILE_ARGS = process.env.BENCH_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${path.join(ROOT, ".tmp/profiles")}`] : [];

function startService(name: "api" | "dispatcher", entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [...PROFILE_ARGS, ...serviceNodeFlags(`start:${name}`), path.join(ROOT, entry)], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "inherit", "inherit"] });
  child.on("exit", (code, signal) => {
    if (!shuttingDown) log(`${name} exited unexpectedly (${code ?? signal})`);
  });
  return child;
}

let extraCaCerts = "";

function forkTs<TReq, TRes>(file: string, request: TReq): Promise<TRes> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, NODE_OPTIONS: "", NODE_EXTRA_CA_CERTS: extraCaCerts };
    const child = fork(path.join(ROOT, file), [], { cwd: ROOT, execArgv: ["--conditions=source", "--import", "tsx"], env });
    child.once("message", (message) => resolve(message as TRes));
    child.once("exit", (code) => (code === 0 ? undefined : reject(new Error(`${file} exited with ${code}`))));
    child.send(request as object);
  });
}

/** Peak resident set size of a process so far (VmHWM), in MB. */
async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round(kb / 1024);
}

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} not ready`);
}

async function api(baseUrl: string, key: string, method: string, p: string, body?: unknown) {
  const res = await fetch(`${baseUrl}${p}`, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: body ? JSON.stringify(body) : undefined });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

let shuttingDown = false;

// ---------- the run ----------
async function main() {
  log(`${QUICK ? "quick" : "full"} run on ${os.cpus().length} cores`);
  log("building");
  const built = spawnSync(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-b"], { cwd: ROOT, stdio: "inherit" });
  if (built.status !== 0) throw new Error("build failed");

  log("preparing the database");
  const admin = new URL(DATABASE_URL);
  const dbName = admin.pathname.slice(1);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await client.end();
  await migrate(DATABASE_URL, MIGRATIONS_DIR);

  log("starting the receiver, the API and a dispatcher");
  const cert = await ensureLocalCertificate(path.join(ROOT, ".tmp/bench-certs"));
  extraCaCerts = cert.certPath;
  const receiver = await startReceiver(cert);
  const port = await getPort({ host: "127.0.0.1" });
  const metricsPort = await getPort({ host: "127.0.0.1" });
  const env = {
    NODE_ENV: "production",
    DATABASE_URL,
    REDIS_URL,
    QUEUE_PREFIX: PREFIX,
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: "warn",
    ALLOW_PRIVATE_TARGETS: "true",
    NODE_EXTRA_CA_CERTS: cert.certPath,
    DELIVERY_RETRY_DELAYS_MS: `${RETRY_DELAY_MS},60000,300000`,
    RATE_LIMIT_PER_MINUTE: "0",
    DISPATCHER_CONCURRENCY: String(CONCURRENCY.dispatcher),
    DATABASE_POOL_SIZE: String(CONCURRENCY.pool),
  };
  const apiProcess = startService("api", "apps/api/dist/main.js", env);
  const dispatcherProcess = startService("dispatcher", "apps/dispatcher/dist/main.js", env);
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitReady(`${baseUrl}/readyz`);
  await waitReady(`http://127.0.0.1:${metricsPort}/healthz`);
  log("registering webhooks");

  const prisma = createPrismaClient(DATABASE_URL, 2);
  const single = await createApiKey(prisma, "bench-single");
  const fanout = await createApiKey(prisma, "bench-fanout");
  const hook = await api(baseUrl, single.key, "POST", "/v1/webhooks", { url: receiver.url, events: ["message.sent"] });
  for (let i = 0; i < 5; i++) await api(baseUrl, fanout.key, "POST", "/v1/webhooks", { url: `${receiver.url}?n=${i}`, events: ["message.sent"] });
  await waitForArrivals(() => arrivalCount >= 6, 10_000);

  const results: Record<string, unknown> = {};
  const load = (request: Omit<LoadRequest, "baseUrl" | "concurrency"> & { concurrency?: number }) =>
    forkTs<LoadRequest, LoadResult>("bench/load.ts", { baseUrl, concurrency: CONCURRENCY.load, ...request });

  // 1. Floor
  const floorRates: number[] = [];
  for (let rep = 0; rep < SIZES.reps; rep++) {
    const runId = `floor${rep}`;
    const before = arrivalCount;
    const r = await forkTs<FloorRequest, { started: number; ended: number; failures: number; firstError?: string }>("bench/floor.ts", {
      databaseUrl: DATABASE_URL,
      redisUrl: REDIS_URL,
      prefix: PREFIX,
      receiverUrl: receiver.url,
      accountId: single.account_id,
      webhookId: hook.body.id,
      count: SIZES.floor,
      concurrency: CONCURRENCY.dispatcher,
      poolSize: CONCURRENCY.pool,
      runId,
    });
    if (r.failures) throw new Error(`floor: ${r.failures} failed deliveries (${r.firstError})`);
    floorRates.push(SIZES.floor / ((r.ended - r.started) / 1000));
    log(`floor ${rep + 1}/${SIZES.reps}: ${Math.round(floorRates.at(-1)!)} deliveries/s (${arrivalCount - before} arrivals)`);
  }
  results.floor = { deliveriesPerSecond: figure(floorRates) };

  // 2. Burst
  const ingestRates: number[] = [];
  const burstRates: number[] = [];
  for (let rep = 0; rep < SIZES.reps; rep++) {
    const runId = `burst${rep}`;
    const r = await load({ apiKey: single.key, count: SIZES.burst, mode: "burst", runId });
    if (r.errors) throw new Error(`burst: ${r.errors} failed requests (${r.firstError})`);
    const ids = Object.keys(r.starts);
    await waitForArrivals(() => ids.every((id) => arrivals.has(id)), 300_000);
    const lastArrival = Math.max(...ids.map((id) => arrivals.get(id)!.first));
    ingestRates.push(SIZES.burst / ((r.lastEnd - r.firstStart) / 1000));
    burstRates.push(SIZES.burst / ((lastArrival - r.firstStart) / 1000));
    log(`burst ${rep + 1}/${SIZES.reps}: ingest ${Math.round(ingestRates.at(-1)!)} events/s, end to end ${Math.round(burstRates.at(-1)!)} deliveries/s`);
  }
  const rss = { api: await peakRssMb(apiProcess.pid!), dispatcher: await peakRssMb(dispatcherProcess.pid!) };
  results.burst = {
    events: SIZES.burst,
    ingestEventsPerSecond: figure(ingestRates),
    deliveriesPerSecond: figure(burstRates),
    ratioToFloor: median(burstRates) / median(floorRates),
  };
  results.memory = { peakRssMb: rss };

  // 3. Paced at half the burst rate
  const pacedRate = Math.max(10, Math.round(median(burstRates) / 2));
  const p50s: number[] = [];
  const p95s: number[] = [];
  const p99s: number[] = [];
  for (let rep = 0; rep < SIZES.reps; rep++) {
    const r = await load({ apiKey: single.key, count: pacedRate, mode: "paced", durationMs: SIZES.pacedMs, runId: `paced${rep}` });
    if (r.errors) throw new Error(`paced: ${r.errors} failed requests (${r.firstError})`);
    const ids = Object.keys(r.starts);
    await waitForArrivals(() => ids.every((id) => arrivals.has(id)), 120_000);
    const latencies = ids.map((id) => arrivals.get(id)!.first - r.starts[id]).sort((a, b) => a - b);
    p50s.push(percentile(latencies, 50));
    p95s.push(percentile(latencies, 95));
    p99s.push(percentile(latencies, 99));
    log(`paced ${rep + 1}/${SIZES.reps} at ${pacedRate}/s: p50 ${p50s.at(-1)!.toFixed(1)} ms, p99 ${p99s.at(-1)!.toFixed(1)} ms`);
  }
  results.paced = { eventsPerSecond: pacedRate, seconds: SIZES.pacedMs / 1000, latencyMs: { p50: figure(p50s), p95: figure(p95s), p99: figure(p99s) } };

  // 4. Fan-out: 5 webhooks per event
  const fanRates: number[] = [];
  for (let rep = 0; rep < SIZES.reps; rep++) {
    const before = okAnswers;
    const r = await load({ apiKey: fanout.key, count: SIZES.fanoutEvents, mode: "burst", runId: `fan${rep}` });
    if (r.errors) throw new Error(`fan-out: ${r.errors} failed requests (${r.firstError})`);
    const expected = SIZES.fanoutEvents * 5;
    await waitForArrivals(() => okAnswers - before >= expected, 300_000);
    fanRates.push(expected / ((now() - r.firstStart) / 1000));
    log(`fan-out ${rep + 1}/${SIZES.reps}: ${Math.round(fanRates.at(-1)!)} deliveries/s`);
  }
  results.fanout = { webhooksPerEvent: 5, events: SIZES.fanoutEvents, deliveriesPerSecond: figure(fanRates) };

  // 5. Retry timing: each delivery fails once; the retry is due RETRY_DELAY_MS after the failure.
  const lateP50: number[] = [];
  const lateP99: number[] = [];
  for (let rep = 0; rep < SIZES.reps; rep++) {
    const r = await load({ apiKey: single.key, count: SIZES.retries, mode: "burst", runId: `retry${rep}`, failOncePrefix: "fail", concurrency: 8 });
    if (r.errors) throw new Error(`retry: ${r.errors} failed requests (${r.firstError})`);
    const ids = Object.keys(r.starts);
    await waitForArrivals(() => ids.every((id) => arrivals.get(id)?.retry !== undefined), 60_000);
    const lateness = ids.map((id) => arrivals.get(id)!).map((a) => a.retry! - ((a.firstAnsweredAt ?? a.first) + RETRY_DELAY_MS)).sort((a, b) => a - b);
    lateP50.push(percentile(lateness, 50));
    lateP99.push(percentile(lateness, 99));
    log(`retry ${rep + 1}/${SIZES.reps}: late by p50 ${lateP50.at(-1)!.toFixed(0)} ms, p99 ${lateP99.at(-1)!.toFixed(0)} ms`);
  }
  results.retryTiming = { deliveries: SIZES.retries, delayMs: RETRY_DELAY_MS, lateByMs: { p50: figure(lateP50), p99: figure(lateP99) } };

  // Cross-check: the dispatcher's own counters against what the receiver answered. A counter
  // moves once the attempt is recorded, just after the receiver answered: let it settle.
  const floorOk = SIZES.floor * SIZES.reps;
  let successes = 0;
  for (let i = 0; i < 50; i++) {
    const metricsText = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    successes = [...metricsText.matchAll(/^webhook_delivery_attempts_total\{[^}]*outcome="success"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    if (successes === okAnswers - floorOk) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  results.crossCheck = { dispatcherSuccessCounter: successes, receiverOkAnswersOutsideFloor: okAnswers - floorOk, consistent: successes === okAnswers - floorOk };

  shuttingDown = true;
  const exited = (child: ChildProcess) => new Promise((resolve) => child.once("exit", resolve));
  apiProcess.kill("SIGTERM");
  dispatcherProcess.kill("SIGTERM");
  // Profiles are written on exit.
  await Promise.all([exited(apiProcess), exited(dispatcherProcess)]);
  receiver.close();
  await prisma.$disconnect();
  return results;
}

function targets(r: any) {
  return [
    ["end-to-end burst >= 0.8 x floor", r.burst.ratioToFloor >= 0.8, `${r.burst.ratioToFloor.toFixed(2)} x`],
    ["ingest >= 2000 events/s", r.burst.ingestEventsPerSecond.median >= 2000, `${Math.round(r.burst.ingestEventsPerSecond.median)}/s`],
    ["paced p50 <= 10 ms", r.paced.latencyMs.p50.median <= 10, `${r.paced.latencyMs.p50.median.toFixed(1)} ms`],
    ["paced p99 <= 100 ms", r.paced.latencyMs.p99.median <= 100, `${r.paced.latencyMs.p99.median.toFixed(1)} ms`],
    ["retries within 250 ms at p99", r.retryTiming.lateByMs.p99.median <= 250, `${r.retryTiming.lateByMs.p99.median.toFixed(0)} ms`],
    ["API RSS <= 150 MB", r.memory.peakRssMb.api <= 150, `${r.memory.peakRssMb.api} MB`],
    ["dispatcher RSS <= 150 MB", r.memory.peakRssMb.dispatcher <= 150, `${r.memory.peakRssMb.dispatcher} MB`],
  ] as const;
}

function printTable(r: any) {
  const f = (x: Figure, digits = 0) => `${x.median.toFixed(digits)} (${x.min.toFixed(digits)}..${x.max.toFixed(digits)})`;
  const rows: [string, string][] = [
    ["floor: bare BullMQ + got + 1 insert, deliveries/s", f(r.floor.deliveriesPerSecond)],
    [`burst: ingest events/s (${r.burst.events} events, concurrency ${CONCURRENCY.load})`, f(r.burst.ingestEventsPerSecond)],
    ["burst: end-to-end deliveries/s", f(r.burst.deliveriesPerSecond)],
    ["burst: ratio to floor", r.burst.ratioToFloor.toFixed(2)],
    [`paced at ${r.paced.eventsPerSecond}/s: latency p50 ms`, f(r.paced.latencyMs.p50, 1)],
    ["paced: latency p95 ms", f(r.paced.latencyMs.p95, 1)],
    ["paced: latency p99 ms", f(r.paced.latencyMs.p99, 1)],
    [`fan-out (5 webhooks x ${r.fanout.events} events): deliveries/s`, f(r.fanout.deliveriesPerSecond)],
    [`retry due after ${r.retryTiming.delayMs} ms: late by p50 ms`, f(r.retryTiming.lateByMs.p50)],
    ["retry: late by p99 ms", f(r.retryTiming.lateByMs.p99)],
    ["peak RSS MB: API / dispatcher", `${r.memory.peakRssMb.api} / ${r.memory.peakRssMb.dispatcher}`],
    ["metrics cross-check (dispatcher successes = receiver 2xx)", r.crossCheck.consistent ? "consistent" : `MISMATCH ${JSON.stringify(r.crossCheck)}`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`\nbenchmark (${QUICK ? "quick" : "full"}; median of ${SIZES.reps}, min..max in parentheses)`);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
  console.log("\ntargets");
  for (const [name, ok, value] of targets(r)) console.log(`  ${ok ? "met   " : "MISSED"}  ${name.padEnd(34)} ${value}`);
}

main()
  .then(async (results) => {
    let commit = "unknown";
    try {
      commit = execSync("git rev-parse --short HEAD", { cwd: ROOT }).toString().trim();
    } catch {
      // not a git checkout
    }
    const report = {
      at: new Date().toISOString(),
      commit,
      quick: QUICK,
      machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model, memoryGb: Math.round(os.totalmem() / 2 ** 30), node: process.version },
      settings: { ...CONCURRENCY, ...SIZES },
      results,
      targets: Object.fromEntries(targets(results).map(([name, ok, value]) => [name, { met: ok, value }])),
    };
    printTable(results);
    await mkdir(path.join(ROOT, "bench/results"), { recursive: true });
    await writeFile(path.join(ROOT, "bench/results/latest.json"), `${JSON.stringify(report, null, 2)}\n`);
    console.log("\nwritten to bench/results/latest.json");
    process.exit(0);
  })
  .catch((error) => {
    console.error(`bench: FAILED: ${(error as Error).stack}`);
    process.exit(1);
  });
