/**
 * The results of a run: bench/results/latest.json (bench/README.md: the headline keys are
 * top-level numbers, medians) and the table on stdout, with the targets of the issues "Fast and
 * flat" and "No endpoint waits for another" met or missed, and, for --grown, each figure beside
 * the empty database's.
 */
import type { NeighbourResult } from "./neighbour.js";
import { formatFigure, type Figure } from "./stats.js";

export interface Figures {
  bare: Figure;
  ingest: Figure;
  ingestLatencyP99: Figure;
  drain: Figure;
  batch: Figure;
  floorGot: Figure;
  floorUndici: Figure;
  burst: Figure;
  burstIngest: Figure;
  fanout: Figure;
  pacedP50: Figure;
  pacedP95: Figure;
  pacedP99: Figure;
  pacedRequestP50: Figure;
  pacedRequestP99: Figure;
  retryLateP50: Figure;
  retryLateP99: Figure;
  rssApiBurst: Figure;
  rssDispatcherBurst: Figure;
  rssApiIngest: Figure;
  rssApiBatch: Figure;
  loadCpuShare: Figure;
  receiverCpuShare: Figure;
}

/** The headline keys of latest.json, each the median of its figure (the neighbour phase runs once). */
export function headline(f: Figures, n: NeighbourResult, grown?: { purgeMs?: number }) {
  return {
    ingest_events_per_s: Math.round(f.ingest.median),
    batch_ingest_events_per_s: Math.round(f.batch.median),
    bare_express_requests_per_s: Math.round(f.bare.median),
    ingest_to_bare_ratio: round2(f.ingest.median / f.bare.median),
    floor_deliveries_per_s: Math.round(f.floorGot.median),
    floor_undici_deliveries_per_s: Math.round(f.floorUndici.median),
    burst_deliveries_per_s: Math.round(f.burst.median),
    burst_to_floor_ratio: round2(f.burst.median / f.floorGot.median),
    fanout_deliveries_per_s: Math.round(f.fanout.median),
    fanout_to_floor_ratio: round2(f.fanout.median / f.floorGot.median),
    drain_deliveries_per_s: Math.round(f.drain.median),
    paced_p50_ms: round1(f.pacedP50.median),
    paced_p99_ms: round1(f.pacedP99.median),
    retry_late_p99_ms: Math.round(f.retryLateP99.median),
    peak_rss_mb_api: Math.max(...f.rssApiBurst.samples),
    peak_rss_mb_dispatcher: Math.max(...f.rssDispatcherBurst.samples),
    neighbour_quiet_p50_ms: round1(n.quiet.p50),
    neighbour_quiet_p99_ms: round1(n.quiet.p99),
    neighbour_loaded_p50_ms: round1(n.loaded.p50),
    neighbour_loaded_p99_ms: round1(n.loaded.p99),
    neighbour_loaded_missing: n.loaded.missing,
    neighbour_backlog: n.backlog,
    neighbour_redis_bytes_per_waiting_delivery: Math.round(n.redisBytesPerWaitingDelivery),
    ...(grown?.purgeMs !== undefined ? { retention_purge_ms: Math.round(grown.purgeMs) } : {}),
  };
}
export type Headline = ReturnType<typeof headline>;

const round1 = (x: number) => Math.round(x * 10) / 10;
const round2 = (x: number) => Math.round(x * 100) / 100;

export interface Target {
  name: string;
  met: boolean;
  value: string;
}

/** ">= " before a percentile that is a missing delivery's wait so far (a lower bound). */
const atLeast = (lowerBound: boolean | undefined) => (lowerBound ? ">= " : "");

/** The targets of "Fast and flat" and of "No endpoint waits for another"; `pacedRateChosen`: the
 * paced phase ran at a rate given with --paced-rate, not at half the burst rate the target names
 * (the line says so); `neighbour`: the neighbour phase's result, whose lower bounds the line marks. */
export function targets(h: Headline, extra: Target[] = [], pacedRateChosen?: number, neighbour?: NeighbourResult): Target[] {
  const t = (name: string, met: boolean, value: string): Target => ({ name, met, value });
  return [
    t("ingest >= 2,000 events/s", h.ingest_events_per_s >= 2_000, `${h.ingest_events_per_s}/s`),
    t("ingest >= 0.4 x bare Express", h.ingest_to_bare_ratio >= 0.4, `${h.ingest_to_bare_ratio} x`),
    t("batch ingest >= 15,000 events/s", h.batch_ingest_events_per_s >= 15_000, `${h.batch_ingest_events_per_s}/s`),
    t("burst >= 0.9 x floor (stretch 1.0)", h.burst_to_floor_ratio >= 0.9, `${h.burst_to_floor_ratio} x`),
    t("fan-out >= 0.9 x floor (stretch 1.0)", h.fanout_to_floor_ratio >= 0.9, `${h.fanout_to_floor_ratio} x`),
    t(
      pacedRateChosen === undefined ? "paced p99 <= 50 ms" : `paced p99 <= 50 ms (at ${pacedRateChosen}/s as asked, not half the burst)`,
      h.paced_p99_ms <= 50,
      `${h.paced_p99_ms} ms`,
    ),
    t("retries within 250 ms at p99", h.retry_late_p99_ms <= 250, `${h.retry_late_p99_ms} ms`),
    t("API RSS <= 150 MB under the burst", h.peak_rss_mb_api <= 150, `${h.peak_rss_mb_api} MB`),
    t("dispatcher RSS <= 150 MB under the burst", h.peak_rss_mb_dispatcher <= 150, `${h.peak_rss_mb_dispatcher} MB`),
    t(
      "neighbours: loaded p99 <= 1.5 x quiet p99 (same run)",
      h.neighbour_loaded_p99_ms <= 1.5 * h.neighbour_quiet_p99_ms,
      `${atLeast(neighbour?.loaded.p99AtLeast)}${h.neighbour_loaded_p99_ms} ms vs ${h.neighbour_quiet_p99_ms} ms: ${atLeast(neighbour?.loaded.p99AtLeast)}${round2(h.neighbour_loaded_p99_ms / h.neighbour_quiet_p99_ms)} x${h.neighbour_loaded_missing ? ` (${h.neighbour_loaded_missing} deliveries missing)` : ""}`,
    ),
    t(
      "neighbours: Redis bytes per waiting delivery <= 200",
      h.neighbour_redis_bytes_per_waiting_delivery <= 200,
      `${h.neighbour_redis_bytes_per_waiting_delivery} B (backlog ${h.neighbour_backlog})`,
    ),
    ...extra,
  ];
}

export function printTable(
  f: Figures,
  h: Headline,
  n: NeighbourResult,
  meta: { mode: string; reps: number; sizes: Record<string, number>; pacedRate: number; connections: Record<string, number> },
  crossCheck: { consistent: boolean },
): void {
  const s = meta.sizes;
  const rows: [string, string][] = [
    [
      `calibration: bare Express 5 JSON route, requests/s (${s.ingest} requests, ${meta.connections.load} connections)`,
      formatFigure(f.bare),
    ],
    [`ingest: POST /v1/events, events/s (${s.ingest} events, dispatcher paused)`, formatFigure(f.ingest)],
    ["ingest: ratio to the bare route", h.ingest_to_bare_ratio.toFixed(2)],
    ["ingest: request latency p99 ms (autocannon)", formatFigure(f.ingestLatencyP99, 1)],
    ["drain: the ingest's backlog once the dispatcher resumed, deliveries/s", formatFigure(f.drain)],
    [
      `batch ingest: ${s.batchSize} events per request, events/s (${s.batch} events, ${meta.connections.batchLoad} connections, not delivered)`,
      formatFigure(f.batch),
    ],
    [`floor: BullMQ + got + 1 insert, deliveries/s (${s.floor}, concurrency ${meta.connections.dispatcher})`, formatFigure(f.floorGot)],
    ["floor: BullMQ + undici + 1 insert, deliveries/s", formatFigure(f.floorUndici)],
    [`burst: end to end, deliveries/s (${s.burst} events)`, formatFigure(f.burst)],
    ["burst: ratio to the got floor", h.burst_to_floor_ratio.toFixed(2)],
    ["burst: ingest events/s while the dispatcher works", formatFigure(f.burstIngest)],
    [`fan-out: 5 webhooks x ${s.fanoutEvents} events, deliveries/s`, formatFigure(f.fanout)],
    ["fan-out: ratio to the got floor", h.fanout_to_floor_ratio.toFixed(2)],
    [`paced at ${meta.pacedRate} events/s: ingest to arrival p50 ms`, formatFigure(f.pacedP50, 1)],
    ["paced: p95 ms", formatFigure(f.pacedP95, 1)],
    ["paced: p99 ms", formatFigure(f.pacedP99, 1)],
    [
      "paced: the ingest request alone (client), p50 / p99 ms",
      `${formatFigure(f.pacedRequestP50, 1)} / ${formatFigure(f.pacedRequestP99, 1)}`,
    ],
    ["retry (due 1 s after a failure): late by p50 ms", formatFigure(f.retryLateP50)],
    ["retry: late by p99 ms", formatFigure(f.retryLateP99)],
    ["peak RSS MB under the burst: API / dispatcher", `${h.peak_rss_mb_api} / ${h.peak_rss_mb_dispatcher}`],
    [
      "peak RSS MB of the API under the ingest / the batch",
      `${Math.max(...f.rssApiIngest.samples)} / ${Math.max(...f.rssApiBatch.samples)}`,
    ],
    ["load generator CPU, share of a core (max over phases)", Math.max(...f.loadCpuShare.samples).toFixed(2)],
    ["receiver CPU, share of a core (max over phases)", Math.max(...f.receiverCpuShare.samples).toFixed(2)],
    [
      `neighbours: ${n.healthyWebhooks} healthy webhooks paced at ${n.rate} events/s for ${n.durationMs / 1000} s, no backlog: p50 / p99 ms`,
      `${n.quiet.p50.toFixed(1)} / ${n.quiet.p99.toFixed(1)}`,
    ],
    [
      `neighbours: the same beside ${n.hangingWebhooks} hanging webhooks (deadline ${n.deliveryTimeoutMs / 1000} s), p50 / p99 ms`,
      `${atLeast(n.loaded.p50AtLeast)}${n.loaded.p50.toFixed(1)} / ${atLeast(n.loaded.p99AtLeast)}${n.loaded.p99.toFixed(1)}`,
    ],
    [
      `neighbours: deliveries not arrived ${n.loaded.arrivalCapMs / 1000} s after the loaded run's last request`,
      `${n.loaded.missing} of ${n.loaded.sent}`,
    ],
    [
      "neighbours: backlog, pending deliveries to the hanging webhooks",
      `${n.backlog} (${n.queued} queued, ${n.waitingLeft} waiting in PostgreSQL)`,
    ],
    ["neighbours: attempts the hanging receiver held until the deadline", String(n.hangingAttempts)],
    [
      "neighbours: Redis used_memory before / after the backlog, MB; bytes per waiting delivery",
      `${(n.redisUsedMemoryBefore / 2 ** 20).toFixed(1)} / ${(n.redisUsedMemoryAfter / 2 ** 20).toFixed(1)}; ${Math.round(n.redisBytesPerWaitingDelivery)}`,
    ],
    [
      "metrics cross-check (dispatcher successes = receiver 2xx)",
      crossCheck.consistent ? "consistent" : `MISMATCH ${JSON.stringify(crossCheck)}`,
    ],
  ];
  printRows(`benchmark (${meta.mode}; ${meta.reps > 1 ? `median of ${meta.reps}, min..max in parentheses` : "one repetition"})`, rows);
}

export function printRows(title: string, rows: [string, string][]): void {
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`\n${title}`);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
}

export function printTargets(list: Target[]): void {
  console.log("\ntargets");
  const width = Math.max(...list.map((t) => t.name.length));
  for (const t of list) console.log(`  ${t.met ? "met   " : "MISSED"}  ${t.name.padEnd(width)}  ${t.value}`);
}

/** The rates of a grown run beside an empty run's, with their ratio ("flat": within 10 %). */
export function compareWithEmpty(grown: Headline, empty: Headline | undefined): { rows: [string, string][]; targets: Target[] } {
  if (!empty) return { rows: [], targets: [] };
  const keys = [
    "ingest_events_per_s",
    "batch_ingest_events_per_s",
    "burst_deliveries_per_s",
    "fanout_deliveries_per_s",
    "drain_deliveries_per_s",
    "paced_p99_ms",
  ] as const;
  const rows: [string, string][] = keys.map((k) => [k, `${grown[k]} vs ${empty[k]} empty: ${(grown[k] / empty[k]).toFixed(2)} x`]);
  const rates = ["ingest_events_per_s", "burst_deliveries_per_s", "fanout_deliveries_per_s"] as const;
  return {
    rows,
    targets: rates.map((k) => ({
      name: `grown: ${k} >= 0.9 x empty`,
      met: grown[k] / empty[k] >= 0.9,
      value: `${(grown[k] / empty[k]).toFixed(2)} x`,
    })),
  };
}
