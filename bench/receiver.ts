/**
 * The benchmark's receiver: a keep-alive HTTPS endpoint in the bench process (on every
 * receiver's listener, @mailhooks/receiver's listenHttps) that answers at once and does as
 * little as it can, so that it is never what limits a phase. It reads the messageId of each
 * body with a regex (no JSON parse, no signature check), timestamps the
 * arrival with `performance.timeOrigin + performance.now()` (comparable across processes) and
 * keeps counters per run. Every messageId the bench sends is `<kind-runId-index-startMs@bench>`:
 * the run it belongs to and when the load process started its request travel with the event.
 */
import { listenHttps } from "@mailhooks/receiver";
import { MESSAGE_ID, now } from "./bodies.js";

/** What a run's deliveries did at the receiver. */
export interface RunArrivals {
  /** Distinct messageIds that arrived at least once. */
  distinct: number;
  /** The indices (in their run) of those messageIds. */
  indices: Set<number>;
  /** 2xx answers (a fan-out event counts once per webhook). */
  ok: number;
  /** Arrival time of the latest first arrival / 2xx answer. */
  lastFirstAt: number;
  lastOkAt: number;
  /** First arrival minus the request start carried in the messageId, per messageId, in ms. */
  latenciesMs: number[];
  /** messageIds of kind "fail" get 500 the first time; how late their second arrival was
   * against `firstAnsweredAt + retryDelayMs`, in ms. */
  retryLatenessMs: number[];
}

interface Tracked {
  firstAnsweredAt?: number;
  retried: boolean;
}

export interface BenchReceiver {
  url: string;
  /** The counters of `runId` (created empty on first use). */
  run: (runId: string) => RunArrivals;
  /** Resolves when `predicate(run(runId))` holds, checked at each arrival of that run. */
  waitFor: (runId: string, predicate: (r: RunArrivals) => boolean, timeoutMs: number) => Promise<RunArrivals>;
  /** 2xx answers to requests that carried no bench messageId (test events of new webhooks). */
  otherOk: () => number;
  /** CPU time this process used since the last call, in ms (the receiver is its main work). */
  cpuMsSince: () => number;
  close: () => void;
}

export async function startBenchReceiver(cert: { cert: string; key: string }, retryDelayMs: number): Promise<BenchReceiver> {
  const runs = new Map<string, RunArrivals>();
  const failOnce = new Map<string, Tracked>();
  const waiters = new Map<string, () => void>();
  let otherOk = 0;
  const runOf = (runId: string) => {
    let r = runs.get(runId);
    if (!r)
      runs.set(runId, (r = { distinct: 0, indices: new Set(), ok: 0, lastFirstAt: 0, lastOkAt: 0, latenciesMs: [], retryLatenessMs: [] }));
    return r;
  };
  // Seen messageIds per run, to count first arrivals (fan-out delivers one messageId 5 times).
  const seen = new Set<string>();

  const listener = await listenHttps(
    cert,
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = now();
        const m = MESSAGE_ID.exec(Buffer.concat(chunks).toString("latin1"));
        if (!m) {
          otherOk++;
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
          return;
        }
        const [, kind, runId, index, startMs] = m;
        const key = m[0];
        const r = runOf(runId);
        let status = 200;
        if (!seen.has(key)) {
          seen.add(key);
          r.distinct++;
          r.indices.add(Number(index));
          r.lastFirstAt = at;
          r.latenciesMs.push(at - Number(startMs));
          if (kind === "fail") {
            status = 500;
            failOnce.set(key, { retried: false });
          }
        } else if (kind === "fail") {
          const t = failOnce.get(key)!;
          if (!t.retried && t.firstAnsweredAt !== undefined) {
            t.retried = true;
            r.retryLatenessMs.push(at - (t.firstAnsweredAt + retryDelayMs));
          }
        }
        if (status === 200) {
          r.ok++;
          r.lastOkAt = at;
        }
        res.writeHead(status, { "content-type": "application/json" });
        res.end("{}", () => {
          if (status !== 200) failOnce.get(key)!.firstAnsweredAt = now();
        });
        waiters.get(runId)?.();
      });
    },
    { keepAliveTimeoutMs: 120_000 },
  );

  let lastCpu = process.cpuUsage();
  return {
    url: listener.url("/hook"),
    run: runOf,
    waitFor: (runId, predicate, timeoutMs) =>
      new Promise((resolve, reject) => {
        const r = runOf(runId);
        const timer = setTimeout(() => {
          waiters.delete(runId);
          reject(new Error(`run ${runId}: deliveries did not arrive within ${timeoutMs} ms (${r.distinct} distinct, ${r.ok} 2xx)`));
        }, timeoutMs);
        const check = () => {
          if (!predicate(r)) return;
          clearTimeout(timer);
          waiters.delete(runId);
          resolve(r);
        };
        waiters.set(runId, check);
        check();
      }),
    otherOk: () => otherOk,
    cpuMsSince: () => {
      const used = process.cpuUsage(lastCpu);
      lastCpu = process.cpuUsage();
      return (used.user + used.system) / 1000;
    },
    close: () => void listener.close(),
  };
}

/** An HTTPS endpoint that takes every request and never answers (see startHangingReceiver). */
export interface HangingReceiver {
  url: string;
  /** Requests taken since the start. */
  taken: () => number;
  /** Requests whose client has not given up yet. */
  held: () => number;
  close: () => void;
}

/**
 * A receiver that hangs: it reads each request and never answers, holding the socket until the
 * client gives up (the dispatcher's DELIVERY_TIMEOUT_MS). Its own server on its own port, so that
 * the dispatcher reaches it over connections of its own, as it would a broken receiver elsewhere.
 */
export async function startHangingReceiver(cert: { cert: string; key: string }): Promise<HangingReceiver> {
  let taken = 0;
  let held = 0;
  const listener = await listenHttps(cert, (req) => {
    taken++;
    held++;
    req.resume();
    req.socket.once("close", () => held--);
  });
  return {
    url: listener.url("/hang"),
    taken: () => taken,
    held: () => held,
    close: () => void listener.close(),
  };
}
