/**
 * The benchmark's load generator, run in its own process (forked once by bench/run.ts) so that
 * it never shares an event loop with what it measures.
 *
 * - `closed`: autocannon (programmatic API, `connections` keep-alive sockets, pipelining 1),
 *   `requests` requests as fast as the server answers; each body is built by `setupRequest`
 *   just before it is written, with unique messageIds that carry the request start time.
 *   Calibration, ingest, batch ingest, burst and fan-out all use this mode, so they are measured
 *   by the same client with the same settings.
 * - `paced`: an open-loop schedule (one request every 1000/rate ms whatever the answers, so no
 *   coordinated omission) over an undici Pool of `connections` sockets.
 *
 * Times are `performance.timeOrigin + performance.now()` ms, comparable across processes.
 */
import autocannon from "autocannon";
import { Pool } from "undici";
import { batchBody, eventBody, now } from "./bodies.js";

export interface LoadRequest {
  mode: "closed" | "paced";
  /** Full URL of the route, e.g. http://127.0.0.1:3000/v1/events. */
  url: string;
  apiKey?: string;
  /** Paced: request i is sent with apiKeys[i % apiKeys.length] (instead of apiKey), so one
   * schedule spreads over several accounts. */
  apiKeys?: string[];
  /** Closed: number of requests. */
  requests?: number;
  /** Paced: requests per second and for how long, in ms. */
  rate?: number;
  durationMs?: number;
  connections: number;
  /** Events per request: 1 posts an event, more a batch body ({events: [...]}). */
  eventsPerRequest: number;
  /** messageId kind: "ok", or "fail" (the receiver fails it once). */
  kind: string;
  runId: string;
}

export interface LoadResult {
  /** Before the first request was built / after the last answer. */
  firstStart: number;
  lastEnd: number;
  requests: number;
  /** Answers that were not 2xx, connection errors and time-outs. */
  failures: number;
  firstFailure?: string;
  /** Request latency as the client saw it, ms. */
  latencyMs: { p50: number; p99: number };
  /** CPU the load process used during the run, as a share of one core (0..1). */
  cpuShare: number;
  /** Paced: when request i started (the start its messageId carries), by index. */
  startsMs?: number[];
}

function bodyFor(request: LoadRequest, index: number, start = now()): string {
  return request.eventsPerRequest === 1
    ? eventBody(request.kind, request.runId, index, start)
    : batchBody(request.kind, request.runId, index * request.eventsPerRequest, request.eventsPerRequest, start);
}

function headersFor(request: LoadRequest, index = 0): Record<string, string> {
  const key = request.apiKeys?.length ? request.apiKeys[index % request.apiKeys.length] : request.apiKey;
  return { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
}

async function closed(request: LoadRequest): Promise<LoadResult> {
  let next = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  let lastEnd = 0;
  const cpu = process.cpuUsage();
  const firstStart = now();
  const instance = autocannon({
    url: request.url,
    method: "POST",
    connections: request.connections,
    pipelining: 1,
    amount: request.requests!,
    timeout: 60,
    headers: headersFor(request),
    requests: [{ setupRequest: (params) => ({ ...params, body: bodyFor(request, next++) }) }],
  });
  instance.on("response", (_client: unknown, statusCode: number) => {
    lastEnd = now();
    if (statusCode < 200 || statusCode > 299) {
      failures++;
      firstFailure ??= `status ${statusCode}`;
    }
  });
  instance.on("reqError", (error: Error) => {
    failures++;
    firstFailure ??= error.message;
  });
  const result = await instance;
  const wall = now() - firstStart;
  const used = process.cpuUsage(cpu);
  if (result.timeouts > 0) {
    failures += result.timeouts;
    firstFailure ??= `${result.timeouts} time-outs`;
  }
  return {
    firstStart,
    lastEnd,
    requests: result.requests.total,
    failures,
    firstFailure,
    latencyMs: { p50: result.latency.p50, p99: result.latency.p99 },
    cpuShare: (used.user + used.system) / 1000 / wall,
  };
}

async function paced(request: LoadRequest): Promise<LoadResult> {
  const url = new URL(request.url);
  const pool = new Pool(url.origin, { connections: request.connections, pipelining: 1 });
  const total = Math.floor(((request.durationMs ?? 10_000) / 1000) * request.rate!);
  const intervalMs = 1000 / request.rate!;
  const latencies: number[] = [];
  const startsMs: number[] = new Array(total);
  let failures = 0;
  let firstFailure: string | undefined;
  let lastEnd = 0;
  const cpu = process.cpuUsage();
  const firstStart = now();
  const send = async (i: number) => {
    const started = (startsMs[i] = now());
    try {
      const { statusCode, body } = await pool.request({
        method: "POST",
        path: url.pathname,
        headers: headersFor(request, i),
        body: bodyFor(request, i, started),
      });
      await body.dump();
      if (statusCode < 200 || statusCode > 299) {
        failures++;
        firstFailure ??= `status ${statusCode}`;
      }
    } catch (error) {
      failures++;
      firstFailure ??= (error as Error).message;
    }
    lastEnd = now();
    latencies.push(lastEnd - started);
  };
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = firstStart + i * intervalMs - now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(send(i));
  }
  await Promise.all(inFlight);
  const wall = now() - firstStart;
  const used = process.cpuUsage(cpu);
  await pool.close();
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
  return {
    firstStart,
    lastEnd,
    requests: total,
    failures,
    firstFailure,
    latencyMs: { p50: at(50), p99: at(99) },
    cpuShare: (used.user + used.system) / 1000 / wall,
    startsMs,
  };
}

// One process serves the whole run: each message is one load, answered with its id.
process.on("message", ({ id, request }: { id: number; request: LoadRequest }) => void answer(id, request));
async function answer(id: number, request: LoadRequest): Promise<void> {
  try {
    process.send!({ id, result: await (request.mode === "closed" ? closed(request) : paced(request)) });
  } catch (error) {
    process.send!({ id, error: (error as Error).stack ?? String(error) });
  }
}
process.on("disconnect", () => process.exit(0));
