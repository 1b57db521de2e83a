/**
 * The floor of the stack, run in its own process (forked by bench/run.ts): a bare BullMQ queue
 * and worker at the dispatcher's concurrency that signs the same envelope bytes, POSTs them to
 * the same receiver and writes one row per delivery with node-postgres (the driver of the
 * service's delivery path), with either got (the dispatcher's HTTP client: a keep-alive agent,
 * as in apps/dispatcher/src/delivery/http-client.ts) or undici (a Pool), so that a reader sees
 * what the HTTP client costs. None of the service's logic: the best this stack can do here.
 * The queue is filled first; the clock runs from the worker's start to the last recorded row.
 */
import https from "node:https";
import { Queue, Worker } from "bullmq";
import got from "got";
import { Pool } from "undici";
import { createPool, newId } from "@mailhooks/db";
import { createRedisConnection } from "@mailhooks/queue";
import { signPayload } from "@mailhooks/signing";
import { benchMessageId, eventItem, now } from "./bodies.js";

export interface FloorRequest {
  client: "got" | "undici";
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  receiverUrl: string;
  accountId: string;
  webhookId: string;
  count: number;
  concurrency: number;
  poolSize: number;
  runId: string;
}

export interface FloorResult {
  started: number;
  ended: number;
  failures: number;
  firstError?: string;
}

type Post = (body: string, headers: Record<string, string>) => Promise<number>;

function httpClient(kind: FloorRequest["client"], receiverUrl: string, concurrency: number): { post: Post; close: () => Promise<void> } {
  if (kind === "got") {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 512 });
    const client = got.extend({
      agent: { https: agent },
      retry: { limit: 0 },
      followRedirect: false,
      throwHttpErrors: false,
      decompress: false,
      timeout: { request: 30_000 },
    });
    return {
      post: async (body, headers) => (await client.post(receiverUrl, { body, headers })).statusCode,
      close: async () => agent.destroy(),
    };
  }
  const url = new URL(receiverUrl);
  const pool = new Pool(url.origin, { connections: concurrency, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 });
  return {
    post: async (body, headers) => {
      const response = await pool.request({ method: "POST", path: url.pathname + url.search, body, headers });
      await response.body.dump();
      return response.statusCode;
    },
    close: () => pool.close(),
  };
}

async function runFloor(request: FloorRequest): Promise<FloorResult> {
  const pool = createPool(request.databaseUrl, request.poolSize);
  const producer = createRedisConnection(request.redisUrl, "worker");
  const queueName = `floor-${request.runId}`;
  const queue = new Queue(queueName, { connection: producer, prefix: request.prefix, defaultJobOptions: { removeOnComplete: true } });
  const queuedAt = now();
  const jobs = Array.from({ length: request.count }, (_, i) => {
    // The envelope the dispatcher would send for the API's own bench event.
    const { event_type: event, data } = eventItem(benchMessageId("floor", request.runId, i, queuedAt));
    const body = JSON.stringify({ event, timestamp: Math.floor(Date.now() / 1000), data });
    return { name: "deliver", data: { body } };
  });
  for (let i = 0; i < jobs.length; i += 1000) await queue.addBulk(jobs.slice(i, i + 1000));
  const http = httpClient(request.client, request.receiverUrl, request.concurrency);
  let done = 0;
  let failures = 0;
  let firstError: string | undefined;
  const started = now();
  let worker!: Worker;
  await new Promise<void>((resolve) => {
    worker = new Worker(
      queueName,
      async (job) => {
        const timestamp = String(Math.floor(Date.now() / 1000));
        const t0 = performance.now();
        try {
          const status = await http.post(job.data.body, {
            "content-type": "application/json",
            "X-Service-Timestamp": timestamp,
            "X-Service-Signature": signPayload("whsec_floor", timestamp, job.data.body),
          });
          await pool.query(
            `INSERT INTO deliveries (id, account_id, event_id, webhook_id, url, trigger, attempt, response_status, duration_ms)
             VALUES ($1, $2, NULL, $3, $4, 'test'::"DeliveryTrigger", 0, $5, $6)`,
            [newId("dlv"), request.accountId, request.webhookId, request.receiverUrl, status, Math.round(performance.now() - t0)],
          );
        } catch (error) {
          failures++;
          firstError ??= (error as Error).message;
        }
        if (++done === request.count) resolve();
      },
      { connection: createRedisConnection(request.redisUrl, "worker"), prefix: request.prefix, concurrency: request.concurrency },
    );
    worker.on("error", () => undefined);
  });
  const ended = now();
  await worker.close();
  await queue.obliterate({ force: true }).catch(() => undefined);
  await queue.close();
  await http.close();
  await pool.end();
  return { started, ended, failures, firstError };
}

process.on("message", (request: FloorRequest) => {
  void runFloor(request).then((result) => process.send!(result, () => process.exit(0)));
});
