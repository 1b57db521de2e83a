/**
 * The measured phases. Each takes the bench and a run id (letters and digits: it travels in the
 * messageIds) and returns what one repetition measured. Rates are events or deliveries over the
 * time from the first request's start (the load process's clock) to the last answer or arrival
 * (the receiver's clock), both `performance.timeOrigin + performance.now()`.
 */
import { now } from "./bodies.js";
import type { FloorRequest, FloorResult } from "./floor.js";
import type { LoadRequest, LoadResult } from "./load.js";
import { fail, forkOnce, pause, peakRssMb, resetPeakRss, resume } from "./processes.js";
import { CONCURRENCY, type Bench } from "./setup.js";
import { percentiles } from "./stats.js";

const perSecond = (count: number, fromMs: number, toMs: number) => count / ((toMs - fromMs) / 1000);

/** Drains wait at most this long for their deliveries (generous: a loaded machine is slow). */
const ARRIVAL_TIMEOUT_MS = 300_000;

async function load(b: Bench, request: Omit<LoadRequest, "connections"> & { connections?: number }): Promise<LoadResult> {
  const result = await b.load.run({ connections: CONCURRENCY.load, ...request });
  if (result.failures > 0) fail(`${request.runId}: ${result.failures} failed requests (${result.firstFailure})`);
  return result;
}

/**
 * The closed loop most phases run: `events` POST /v1/events of one event each to the main API,
 * as the single account, messageIds of kind "ok"; `overrides` for what a phase does otherwise.
 */
function postEvents(
  b: Bench,
  runId: string,
  events: number,
  overrides: Partial<Pick<LoadRequest, "apiKey" | "kind" | "connections">> = {},
): Promise<LoadResult> {
  return load(b, {
    mode: "closed",
    url: `${b.apiUrl}/v1/events`,
    apiKey: b.single.key,
    requests: events,
    eventsPerRequest: 1,
    kind: "ok",
    runId,
    ...overrides,
  });
}

/** The share of one core the bench process (the receiver) used since the last reading. */
const receiverCpuShare = (b: Bench, fromMs: number) => b.receiver.cpuMsSince() / (now() - fromMs);

export interface ThroughputSample {
  rate: number;
  loadCpuShare: number;
  receiverCpuShare?: number;
  latencyMs?: { p50: number; p99: number };
}

/** The bare Express 5 JSON route, same body, same load generator and settings as the ingest. */
export async function calibration(b: Bench, runId: string, requests: number): Promise<ThroughputSample> {
  const r = await load(b, { mode: "closed", url: `${b.bareUrl}/v1/events`, requests, eventsPerRequest: 1, kind: "cal", runId });
  return { rate: perSecond(requests, r.firstStart, r.lastEnd), loadCpuShare: r.cpuShare, latencyMs: r.latencyMs };
}

export interface IngestSample extends ThroughputSample {
  /** Deliveries/s of the backlog once the dispatcher resumed. */
  drainRate: number;
  apiPeakRssMb: number;
}

/**
 * POST /v1/events with the dispatcher paused (SIGSTOP), so that the API process has the machine
 * to itself as the bare route had; then the dispatcher resumes and the backlog (work queue → BullMQ →
 * receiver) is drained and timed.
 */
export async function ingest(b: Bench, runId: string, events: number): Promise<IngestSample> {
  await resetPeakRss(b.api.pid);
  pause(b.dispatcher);
  let r: LoadResult;
  try {
    r = await postEvents(b, runId, events);
  } finally {
    resume(b.dispatcher);
  }
  const resumedAt = now();
  const apiPeakRssMb = await peakRssMb(b.api.pid);
  const arrived = await b.receiver.waitFor(runId, (a) => a.distinct >= events, ARRIVAL_TIMEOUT_MS);
  return {
    rate: perSecond(events, r.firstStart, r.lastEnd),
    drainRate: perSecond(events, resumedAt, arrived.lastFirstAt),
    loadCpuShare: r.cpuShare,
    latencyMs: r.latencyMs,
    apiPeakRssMb,
  };
}

export interface BatchSample extends ThroughputSample {
  apiPeakRssMb: number;
}

/**
 * POST /v1/events/batch, `perRequest` events each, to the batch phase's API (same build, a queue
 * prefix no dispatcher relays: everything is stored, nothing delivered), the other processes idle.
 */
export async function batch(b: Bench, runId: string, events: number, perRequest: number): Promise<BatchSample> {
  await resetPeakRss(b.batchApi.pid);
  const r = await load(b, {
    mode: "closed",
    url: `${b.batchApiUrl}/v1/events/batch`,
    apiKey: b.single.key,
    requests: events / perRequest,
    eventsPerRequest: perRequest,
    connections: CONCURRENCY.batchLoad,
    kind: "ok",
    runId,
  });
  return {
    rate: perSecond(events, r.firstStart, r.lastEnd),
    loadCpuShare: r.cpuShare,
    latencyMs: r.latencyMs,
    apiPeakRssMb: await peakRssMb(b.batchApi.pid),
  };
}

/** The floor: a bare BullMQ worker posting the same signed bodies with got or undici. */
export async function floor(b: Bench, runId: string, client: FloorRequest["client"], count: number): Promise<ThroughputSample> {
  const since = now();
  b.receiver.cpuMsSince();
  const r = await forkOnce<FloorRequest, FloorResult>(
    b.root,
    "bench/floor.ts",
    {
      client,
      databaseUrl: b.databaseUrl,
      redisUrl: b.redisUrl,
      prefix: b.prefix,
      receiverUrl: b.receiver.url,
      accountId: b.single.accountId,
      webhookId: b.single.webhookId,
      count,
      concurrency: CONCURRENCY.dispatcher,
      poolSize: CONCURRENCY.pool,
      runId,
    },
    b.helperEnv,
  );
  if (r.failures) fail(`floor ${runId}: ${r.failures} failed deliveries (${r.firstError})`);
  const ok = b.receiver.run(runId).ok;
  if (ok !== count) fail(`floor ${runId}: the receiver answered ${ok} of ${count} deliveries`);
  return { rate: perSecond(count, r.started, r.ended), loadCpuShare: 0, receiverCpuShare: receiverCpuShare(b, since) };
}

export interface BurstSample extends ThroughputSample {
  ingestRate: number;
  peakRssMb: { api: number; dispatcher: number };
}

/** N events as fast as the API takes them, the dispatcher running: first request to last arrival. */
export async function burst(b: Bench, runId: string, events: number): Promise<BurstSample> {
  await Promise.all([resetPeakRss(b.api.pid), resetPeakRss(b.dispatcher.pid)]);
  b.receiver.cpuMsSince();
  const r = await postEvents(b, runId, events);
  const arrived = await b.receiver.waitFor(runId, (a) => a.distinct >= events, ARRIVAL_TIMEOUT_MS);
  return {
    rate: perSecond(events, r.firstStart, arrived.lastFirstAt),
    ingestRate: perSecond(events, r.firstStart, r.lastEnd),
    loadCpuShare: r.cpuShare,
    receiverCpuShare: receiverCpuShare(b, r.firstStart),
    peakRssMb: { api: await peakRssMb(b.api.pid), dispatcher: await peakRssMb(b.dispatcher.pid) },
  };
}

/** Events to an account with 5 webhooks: deliveries from the first request to the last 2xx. */
export async function fanout(b: Bench, runId: string, events: number): Promise<ThroughputSample> {
  const r = await postEvents(b, runId, events, { apiKey: b.fanout.key });
  const arrived = await b.receiver.waitFor(runId, (a) => a.ok >= events * 5, ARRIVAL_TIMEOUT_MS);
  return { rate: perSecond(events * 5, r.firstStart, arrived.lastOkAt), loadCpuShare: r.cpuShare };
}

/** An open-loop schedule at `rate` events/s: ingest-to-arrival latency of every event. */
export async function paced(b: Bench, runId: string, rate: number, durationMs: number) {
  const r = await load(b, {
    mode: "paced",
    url: `${b.apiUrl}/v1/events`,
    apiKey: b.single.key,
    rate,
    durationMs,
    eventsPerRequest: 1,
    kind: "ok",
    runId,
  });
  const arrived = await b.receiver.waitFor(runId, (a) => a.distinct >= r.requests, ARRIVAL_TIMEOUT_MS);
  // The answer's latency, as the client saw it, tells how much of the arrival latency is ingest.
  return {
    ...percentiles(arrived.latenciesMs),
    requestLatencyMs: r.latencyMs,
    sent: r.requests,
    achievedRate: perSecond(r.requests, r.firstStart, r.lastEnd),
  };
}

/** Each delivery fails once (500); how late its retry arrives against its schedule. */
export async function retryTiming(b: Bench, runId: string, count: number, retryDelayMs: number) {
  await postEvents(b, runId, count, { kind: "fail", connections: 8 });
  const arrived = await b.receiver.waitFor(runId, (a) => a.retryLatenessMs.length >= count, 60_000 + retryDelayMs);
  return percentiles(arrived.retryLatenessMs);
}

/**
 * The dispatcher's own count of successful attempts against the 2xx answers of the receiver to
 * anything but the floor. A counter moves once the attempt is recorded, just after the receiver
 * answered: it may take a moment to settle.
 */
export async function crossCheck(b: Bench, floorRunIds: string[], otherRunIds: string[]) {
  const expected = otherRunIds.reduce((n, id) => n + b.receiver.run(id).ok, 0) + b.receiver.otherOk();
  const floorOk = floorRunIds.reduce((n, id) => n + b.receiver.run(id).ok, 0);
  let successes = 0;
  for (let i = 0; i < 100; i++) {
    const text = await (await fetch(b.metricsUrl)).text();
    successes = [...text.matchAll(/^webhook_delivery_attempts_total\{[^}]*outcome="success"[^}]*\} (\d+)/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
    if (successes === expected) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    dispatcherSuccessCounter: successes,
    receiverOkAnswersOutsideFloor: expected,
    floorOkAnswers: floorOk,
    consistent: successes === expected,
  };
}
