/**
 * The neighbour phase (issue 18 "No endpoint waits for another"; bench/README.md): 20
 * healthy webhooks paced while hanging webhooks hold a backlog of deliveries.
 *
 * It runs on processes of its own, so that its deadline, retries and Redis are its own: an API
 * and a dispatcher (the same build and Node flags as the bench's) under their own queue prefix,
 * with `DELIVERY_TIMEOUT_MS=2000` and short retry delays, against a private `redis-server` (no
 * persistence), whose `used_memory` therefore counts only this phase's work.
 *
 * - Accounts: "hanging A" has 4 hanging webhooks and 1 healthy one, "hanging B" 1 hanging and 1
 *   healthy, and 18 accounts 1 healthy webhook each: 20 healthy webhooks (message.sent, at the
 *   bench's receiver), 5 hanging ones (message.delivered, at a receiver that never answers). A
 *   hanging webhook is created at the healthy receiver and then moved there (PATCH sends no test
 *   event), so that no test event hangs during the quiet run.
 * - Warm-up (WARM_UP_MS of the same traffic, not measured: the processes are new), then the
 *   quiet run: `rate` events/s for `durationMs`, request i sent with the key of account i mod 20
 *   (so each event has exactly one delivery, to a healthy webhook): arrival at the receiver
 *   minus the start of its request, as the paced phase measures it.
 * - Backlog: message.delivered events by `POST /v1/events/batch` (500 each) to the two hanging
 *   accounts (4 and 1 deliveries per event), at least `backlog` deliveries; Redis `used_memory`
 *   just before, and once the claims have run (the hanging webhooks' leases no more for 2 s).
 * - Loaded run: the same paced traffic. Arrivals are awaited at most `arrivalCapMs` after its last
 *   answer; a delivery not in by then is missing, and counts in the percentiles as the time it had
 *   waited by then (a lower bound: the figure then reads "at least").
 * - The hanging webhooks are disabled at the end (their pending destinations end cancelled), and
 *   the phase's processes, the private Redis and the hanging receiver are stopped.
 */
import path from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import { createApiKey } from "@mailhooks/access";
import { createPrismaClient } from "@mailhooks/db";
import { freePort, startRedisServer } from "@mailhooks/processes";
import { deliveredBatchBody, now } from "./bodies.js";
import { fail, log, nodeFlagsOf, profileFlags, startChild, stopChild, waitReady } from "./processes.js";
import { startHangingReceiver } from "./receiver.js";
import { CONCURRENCY, type Bench } from "./setup.js";
import { percentiles } from "./stats.js";

/** The receivers' deadline and the retry delays of the phase's dispatcher, in ms. */
export const NEIGHBOUR_DELIVERY_TIMEOUT_MS = 2_000;
export const NEIGHBOUR_RETRY_DELAYS_MS = [1_000, 5_000, 30_000];
const HEALTHY_WEBHOOKS = 20;
/** Hanging webhooks of the two hanging accounts. */
const HANGING_A = 4;
const HANGING_B = 1;
const BATCH = 500;
/** Bounds of the phase's waits, in ms: each ends the run with a clear error, or (the loaded
 * run's arrivals, the relay) ends the wait and reports what it found. */
const TEST_EVENTS_TIMEOUT_MS = 60_000;
const QUIET_ARRIVAL_TIMEOUT_MS = 60_000;
const RELAY_WAIT_MS = 30_000;
/** The claims have run once the hanging webhooks' leases grew no more over RELAY_STILL_MS. */
const RELAY_STILL_MS = 2_000;
/** Paced traffic before the quiet run, not measured, in ms. */
const WARM_UP_MS = 2_000;

export interface NeighbourSizes {
  rate: number;
  durationMs: number;
  backlog: number;
  arrivalCapMs: number;
}

export interface PacedArrivals {
  p50: number;
  p95: number;
  p99: number;
  sent: number;
  arrived: number;
  /** Deliveries not arrived within the wait: each counts as the time it had waited by then. */
  missing: number;
  /** Whether p50 / p99 is such a time (a lower bound of the true figure), not an arrival's. */
  p50AtLeast: boolean;
  p99AtLeast: boolean;
}

export interface NeighbourResult {
  rate: number;
  durationMs: number;
  healthyWebhooks: number;
  hangingWebhooks: number;
  deliveryTimeoutMs: number;
  retryDelaysMs: number[];
  quiet: PacedArrivals;
  loaded: PacedArrivals & { arrivalCapMs: number };
  /** Deliveries queued to the hanging webhooks by batch ingest. */
  queued: number;
  /** Pending destinations of the hanging webhooks at the start of the loaded run (SQL count). */
  backlog: number;
  /** Units of work of the phase's deployment still waiting in PostgreSQL once the claims ran. */
  waitingLeft: number;
  relayWaitMs: number;
  redisUsedMemoryBefore: number;
  redisUsedMemoryAfter: number;
  redisBytesPerWaitingDelivery: number;
  /** Requests the hanging receiver took (attempts that ran into the deadline). */
  hangingAttempts: number;
}

async function call(url: string, method: string, key: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

async function mustCall(url: string, method: string, key: string, body: unknown, what: string): Promise<any> {
  const r = await call(url, method, key, body);
  if (r.status < 200 || r.status > 299) throw new Error(`neighbour phase: ${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Polls `check` every 250 ms until it returns a value other than undefined; throws after `timeoutMs`. */
async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`neighbour phase: ${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Redis `used_memory` (INFO memory), in bytes. */
async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info("memory");
  const match = /^used_memory:(\d+)/m.exec(info);
  if (!match) throw new Error("neighbour phase: no used_memory in Redis INFO memory");
  return Number(match[1]);
}

/** A private redis-server (no persistence) whose unexpected exit fails the run, and a client of it. */
async function startPrivateRedis() {
  const server = await startRedisServer({
    killWithParent: true,
    onUnexpectedExit: (exit) => fail(`the neighbour phase's redis-server exited unexpectedly (${exit.code ?? exit.signal})`),
  });
  const client = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 100, lazyConnect: true });
  client.on("error", () => undefined);
  await until("the private redis-server did not answer PING", 10_000, async () =>
    (await client.ping().catch(() => "")) === "PONG" ? true : undefined,
  );
  return { server, url: server.url, client };
}

/** Paced traffic over the healthy webhooks' accounts; waits for its arrivals at most `waitMs` after its last answer. */
async function pacedRun(
  b: Bench,
  apiUrl: string,
  keys: string[],
  runId: string,
  sizes: NeighbourSizes,
  waitMs: number,
): Promise<PacedArrivals> {
  const r = await b.load.run({
    mode: "paced",
    url: `${apiUrl}/v1/events`,
    apiKeys: keys,
    rate: sizes.rate,
    durationMs: sizes.durationMs,
    connections: CONCURRENCY.load,
    eventsPerRequest: 1,
    kind: "ok",
    runId,
  });
  if (r.failures > 0) fail(`${runId}: ${r.failures} failed requests (${r.firstFailure})`);
  const arrivals = await b.receiver
    .waitFor(runId, (a) => a.distinct >= r.requests, Math.max(0, r.lastEnd + waitMs - now()))
    .catch(() => b.receiver.run(runId));
  const waitedUntil = now();
  const latencies = [...arrivals.latenciesMs];
  let missing = 0;
  let leastWaited = Infinity;
  for (let i = 0; i < r.requests; i++) {
    if (arrivals.indices.has(i)) continue;
    missing++;
    leastWaited = Math.min(leastWaited, waitedUntil - r.startsMs![i]);
    latencies.push(waitedUntil - r.startsMs![i]);
  }
  // A percentile below every missing delivery's wait is an arrival's, exact: the missing ones
  // would arrive later still and stay above it.
  const p = percentiles(latencies);
  return {
    ...p,
    sent: r.requests,
    arrived: arrivals.distinct,
    missing,
    p50AtLeast: p.p50 >= leastWaited,
    p99AtLeast: p.p99 >= leastWaited,
  };
}

/** Runs the phase (see the module's comment); throws with a clear message when a bounded wait ends. */
export async function neighbours(b: Bench, sizes: NeighbourSizes): Promise<NeighbourResult> {
  const redis = await startPrivateRedis();
  const hanging = await startHangingReceiver(b.cert);
  const db = new pg.Client({ connectionString: b.databaseUrl });
  await db.connect();
  const queuePrefix = `${b.prefix}-nb`;
  const [port, adminPort, metricsPort] = await Promise.all([1, 2, 3].map(() => freePort()));
  const env: NodeJS.ProcessEnv = {
    ...b.serviceEnv,
    REDIS_URL: redis.url,
    QUEUE_PREFIX: queuePrefix,
    PORT: String(port),
    ADMIN_PORT: String(adminPort),
    METRICS_PORT: String(metricsPort),
    DELIVERY_TIMEOUT_MS: String(NEIGHBOUR_DELIVERY_TIMEOUT_MS),
    DELIVERY_RETRY_DELAYS_MS: NEIGHBOUR_RETRY_DELAYS_MS.join(","),
  };
  const service = (name: "api" | "dispatcher") =>
    startChild(
      `the neighbour phase's ${name}`,
      [
        ...profileFlags(b.root, `neighbour-${name}`),
        ...nodeFlagsOf(b.root, `start:${name}`),
        path.join(b.root, `apps/${name}/dist/main.js`),
      ],
      {
        cwd: b.root,
        env,
      },
    );
  const api = service("api");
  const dispatcher = service("dispatcher");
  const apiUrl = `http://127.0.0.1:${port}`;
  const hangingHooks: { key: string; id: string }[] = [];
  try {
    await waitReady(`${apiUrl}/readyz`, "the neighbour phase's API");
    await waitReady(`http://127.0.0.1:${metricsPort}/healthz`, "the neighbour phase's dispatcher");

    // 2 hanging accounts + 18 others, one healthy webhook each.
    const prisma = createPrismaClient(b.databaseUrl, 2);
    const accounts = [];
    for (let i = 0; i < HEALTHY_WEBHOOKS; i++) accounts.push(await createApiKey(prisma, `${b.prefix}-nb${i}`));
    await prisma.$disconnect();
    const keys = accounts.map((a) => a.key);
    for (let i = 0; i < HEALTHY_WEBHOOKS; i++) {
      await mustCall(
        `${apiUrl}/v1/webhooks`,
        "POST",
        keys[i],
        { url: `${b.receiver.url}?nb=${i}`, events: ["message.sent"] },
        "creating a healthy webhook",
      );
    }
    const hangingPlan = [...Array(HANGING_A).fill(keys[0]), ...Array(HANGING_B).fill(keys[1])] as string[];
    for (const [i, key] of hangingPlan.entries()) {
      const hook = await mustCall(
        `${apiUrl}/v1/webhooks`,
        "POST",
        key,
        { url: `${b.receiver.url}?nb-hanging=${i}`, events: ["message.delivered"] },
        "creating a hanging webhook",
      );
      hangingHooks.push({ key, id: hook.id });
    }
    await until("the test events of the new webhooks were not delivered", TEST_EVENTS_TIMEOUT_MS, async () => {
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM test_deliveries WHERE queue_prefix = $1 AND status = 'pending'`,
        [queuePrefix],
      );
      return rows[0].n === 0 ? true : undefined;
    });
    for (const [i, hook] of hangingHooks.entries()) {
      await mustCall(
        `${apiUrl}/v1/webhooks/${hook.id}`,
        "PATCH",
        hook.key,
        { url: `${hanging.url}?w=${i}` },
        "moving a webhook to the hanging receiver",
      );
    }

    // The phase's processes are new: their first traffic (JIT, pools, caches) is not measured.
    const warm = await pacedRun(b, apiUrl, keys, "nbw", { ...sizes, durationMs: WARM_UP_MS }, QUIET_ARRIVAL_TIMEOUT_MS);
    if (warm.missing > 0)
      throw new Error(
        `neighbour phase: ${warm.missing} of the warm-up's ${warm.sent} deliveries did not arrive within ${QUIET_ARRIVAL_TIMEOUT_MS} ms`,
      );
    log(`neighbours: quiet run, ${sizes.rate} events/s for ${sizes.durationMs / 1000} s over ${HEALTHY_WEBHOOKS} healthy webhooks`);
    const quiet = await pacedRun(b, apiUrl, keys, "nbq", sizes, QUIET_ARRIVAL_TIMEOUT_MS);
    if (quiet.missing > 0)
      throw new Error(
        `neighbour phase: ${quiet.missing} of the quiet run's ${quiet.sent} deliveries did not arrive within ${QUIET_ARRIVAL_TIMEOUT_MS} ms`,
      );

    const redisUsedMemoryBefore = await usedMemory(redis.client);
    // One delivery per event for B, HANGING_A for A: equal events to each reach the backlog.
    const eventsEach = Math.ceil(sizes.backlog / (HANGING_A + HANGING_B));
    const queued = eventsEach * (HANGING_A + HANGING_B);
    log(`neighbours: queueing ${queued} deliveries to ${hangingHooks.length} hanging webhooks (batch ingest, ${BATCH} per request)`);
    let index = 0;
    for (const key of [keys[0], keys[1]]) {
      for (let sent = 0; sent < eventsEach; sent += BATCH) {
        const size = Math.min(BATCH, eventsEach - sent);
        await mustCall(`${apiUrl}/v1/events/batch`, "POST", key, deliveredBatchBody("nbh", index, size, now()), "queueing the backlog");
        index += size;
      }
    }
    // The claims lease what the slots allow; the rest waits in PostgreSQL, not in Redis.
    const relayStart = Date.now();
    const seen: { at: number; leased: number }[] = [];
    let waitingLeft = Infinity;
    while (Date.now() - relayStart < RELAY_WAIT_MS) {
      const { rows } = await db.query<{ waiting: number; leased: number }>(
        `SELECT (count(*) FILTER (WHERE leased_until IS NULL))::int AS waiting, (count(*) FILTER (WHERE leased_until > now()))::int AS leased
           FROM work_items WHERE queue_prefix = $1`,
        [queuePrefix],
      );
      waitingLeft = rows[0].waiting;
      seen.push({ at: Date.now(), leased: rows[0].leased });
      const earlier = seen.findLast((s) => s.at <= Date.now() - RELAY_STILL_MS);
      if (rows[0].leased > 0 && earlier && earlier.leased >= rows[0].leased) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const relayWaitMs = Date.now() - relayStart;
    const redisUsedMemoryAfter = await usedMemory(redis.client);
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM destinations WHERE webhook_id = ANY($1) AND status = 'pending'`,
      [hangingHooks.map((h) => h.id)],
    );
    const backlog = rows[0].n;
    log(
      `neighbours: backlog ${backlog} (${waitingLeft} waiting in PostgreSQL after ${relayWaitMs} ms), Redis used_memory ${(redisUsedMemoryBefore / 2 ** 20).toFixed(1)} -> ${(redisUsedMemoryAfter / 2 ** 20).toFixed(1)} MB; loaded run`,
    );

    const loaded = await pacedRun(b, apiUrl, keys, "nbl", sizes, sizes.arrivalCapMs);
    return {
      rate: sizes.rate,
      durationMs: sizes.durationMs,
      healthyWebhooks: HEALTHY_WEBHOOKS,
      hangingWebhooks: hangingHooks.length,
      deliveryTimeoutMs: NEIGHBOUR_DELIVERY_TIMEOUT_MS,
      retryDelaysMs: NEIGHBOUR_RETRY_DELAYS_MS,
      quiet,
      loaded: { ...loaded, arrivalCapMs: sizes.arrivalCapMs },
      queued,
      backlog,
      waitingLeft,
      relayWaitMs,
      redisUsedMemoryBefore,
      redisUsedMemoryAfter,
      redisBytesPerWaitingDelivery: backlog > 0 ? (redisUsedMemoryAfter - redisUsedMemoryBefore) / backlog : NaN,
      hangingAttempts: hanging.taken(),
    };
  } finally {
    const cleanupStart = Date.now();
    // Disabled, their pending destinations end cancelled: a dispatcher left running would stop.
    for (const hook of hangingHooks)
      await call(`${apiUrl}/v1/webhooks/${hook.id}`, "PATCH", hook.key, { status: "disabled" }).catch(() => undefined);
    await stopChild(dispatcher);
    await stopChild(api);
    redis.client.disconnect();
    await redis.server.destroy();
    hanging.close();
    // Work left waiting would outlive the run in a database that is kept (--grown).
    for (const table of ["work_items", "webhook_queues", "dispatchers"])
      await db.query(`DELETE FROM ${table} WHERE queue_prefix = $1`, [queuePrefix]);
    await db.end();
    log(`neighbours: hanging webhooks disabled, the phase's processes stopped (${Date.now() - cleanupStart} ms)`);
  }
}
