/**
 * The floor of the stack, run in its own process (forked by bench/run.ts): a bare BullMQ queue
 * and worker at the dispatcher's concurrency that signs the same envelope bytes, POSTs them with
 * got to the same receiver and writes one row per delivery with the same Prisma client. None of
 * the service's logic: the best this stack can do on this machine.
 */
import https from "node:https";
import { Queue, Worker } from "bullmq";
import got from "got";
import { createPrismaClient, newId } from "@mailhooks/db";
import { createRedisConnection } from "@mailhooks/queue";
import { signPayload } from "@mailhooks/signing";

export interface FloorRequest {
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

process.on("message", async (request: FloorRequest) => {
  const prisma = createPrismaClient(request.databaseUrl, request.poolSize);
  const producer = createRedisConnection(request.redisUrl, "worker");
  const queue = new Queue("floor", { connection: producer, prefix: request.prefix, defaultJobOptions: { removeOnComplete: true } });
  const jobs = Array.from({ length: request.count }, (_, i) => {
    const body = JSON.stringify({
      event: "message.sent",
      timestamp: Math.floor(Date.now() / 1000),
      data: { messageId: `<floor-${request.runId}-${i}@bench>`, threadId: "thr_bench", inboxId: "bench@inbox.example.net", from: "bench@inbox.example.net", to: ["receiver@example.com"], subject: "Benchmark", status: "sent" },
    });
    return { name: "deliver", data: { body } };
  });
  for (let i = 0; i < jobs.length; i += 1000) await queue.addBulk(jobs.slice(i, i + 1000));
  const client = got.extend({ agent: { https: new https.Agent({ keepAlive: true, maxSockets: 512 }) }, retry: { limit: 0 }, followRedirect: false, throwHttpErrors: false, timeout: { request: 30_000 } });
  const started = performance.timeOrigin + performance.now();
  let done = 0;
  let failures = 0;
  let firstError: string | undefined;
  const finished = new Promise<void>((resolve) => {
    const worker = new Worker(
      "floor",
      async (job) => {
        const timestamp = String(Math.floor(Date.now() / 1000));
        const t0 = performance.now();
        try {
          const response = await client.post(request.receiverUrl, {
            body: job.data.body,
            headers: { "content-type": "application/json", "X-Service-Timestamp": timestamp, "X-Service-Signature": signPayload("whsec_floor", timestamp, job.data.body) },
          });
          await prisma.$executeRaw`
            INSERT INTO deliveries (id, account_id, event_id, webhook_id, url, trigger, attempt, response_status, duration_ms)
            VALUES (${newId("dlv")}, ${request.accountId}, ${null}, ${request.webhookId}, ${request.receiverUrl}, 'test'::"DeliveryTrigger", 0, ${response.statusCode}, ${Math.round(performance.now() - t0)})`;
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
  await finished;
  const ended = performance.timeOrigin + performance.now();
  await queue.obliterate({ force: true }).catch(() => undefined);
  process.send!({ started, ended, failures, firstError }, () => process.exit(0));
});
