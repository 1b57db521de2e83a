/**
 * The benchmark's load generator, run in its own process (forked by bench/run.ts). It POSTs
 * message.sent events to /v1/events with keep-alive connections, either as fast as `concurrency`
 * allows (burst) or at a constant rate (paced), and reports each event's request start time.
 * Times are `performance.timeOrigin + performance.now()` ms, comparable across processes.
 */
import http from "node:http";

export interface LoadRequest {
  baseUrl: string;
  apiKey: string;
  /** Number of events (burst) or events per second (paced). */
  count: number;
  mode: "burst" | "paced";
  concurrency: number;
  /** Paced mode: how long to send, in ms. */
  durationMs?: number;
  runId: string;
  /** Prefix of the messageIds that the receiver should fail once (retry phase). */
  failOncePrefix?: string;
}

export interface LoadResult {
  /** messageId -> request start time (ms). */
  starts: Record<string, number>;
  firstStart: number;
  lastEnd: number;
  errors: number;
  firstError?: string;
}

const now = () => performance.timeOrigin + performance.now();
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function post(url: URL, apiKey: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: "/v1/events", method: "POST", agent, headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function eventBody(messageId: string): string {
  return JSON.stringify({
    event_type: "message.sent",
    data: { messageId, threadId: "thr_bench", inboxId: "bench@inbox.example.net", from: "bench@inbox.example.net", to: ["receiver@example.com"], subject: "Benchmark", status: "sent" },
  });
}

async function run(request: LoadRequest): Promise<LoadResult> {
  const url = new URL(request.baseUrl);
  const result: LoadResult = { starts: {}, firstStart: now(), lastEnd: 0, errors: 0 };
  let next = 0;
  const send = async (i: number) => {
    const prefix = request.failOncePrefix ?? "ok";
    const messageId = `<${prefix}-${request.runId}-${i}@bench>`;
    const started = now();
    result.starts[messageId] = started;
    try {
      const status = await post(url, request.apiKey, eventBody(messageId));
      if (status !== 201) {
        result.errors++;
        result.firstError ??= `status ${status}`;
      }
    } catch (error) {
      result.errors++;
      result.firstError ??= (error as Error).message;
    }
    result.lastEnd = now();
  };
  if (request.mode === "burst") {
    const workers = Array.from({ length: request.concurrency }, async () => {
      while (next < request.count) await send(next++);
    });
    await Promise.all(workers);
  } else {
    // Paced: one request every 1000/count ms on a fixed schedule (no coordinated omission).
    const intervalMs = 1000 / request.count;
    const total = Math.floor(((request.durationMs ?? 10_000) / 1000) * request.count);
    const start = now();
    const inFlight: Promise<void>[] = [];
    for (let i = 0; i < total; i++) {
      const due = start + i * intervalMs;
      const wait = due - now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      inFlight.push(send(i));
    }
    await Promise.all(inFlight);
  }
  return result;
}

process.on("message", async (request: LoadRequest) => {
  const result = await run(request);
  process.send!(result, () => process.exit(0));
});
