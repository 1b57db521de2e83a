/**
 * What every phase runs against: the built API and one dispatcher (production settings,
 * LOG_LEVEL=warn), the bare Express route, the receiver, the load generator, and two accounts
 * made for this run (one webhook; five webhooks), on a database prepared by the caller.
 *
 * A second API process, the same build with the same flags, serves the batch phase under a queue
 * prefix that no dispatcher relays (UNDELIVERED_SUFFIX): it stores exactly what the first one
 * would (events, payloads, destinations, work queue rows), but nothing is delivered, so the batch can
 * be large without a long drain afterwards.
 */
import { randomBytes } from "node:crypto";
import path from "node:path";
import { createApiKey } from "@mailhooks/access";
import { createPrismaClient } from "@mailhooks/db";
import { freePort, type StartedProcess } from "@mailhooks/processes";
import { ensureLocalCertificate, type LocalCertificate } from "@mailhooks/receiver";
import { startBenchReceiver, type BenchReceiver } from "./receiver.js";
import { log, nodeFlagsOf, profileFlags, startChild, startLoadGenerator, waitReady, type LoadGenerator } from "./processes.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

export const CONCURRENCY = { load: 32, batchLoad: 8, dispatcher: 64, pool: 10 };
export const RETRY_DELAY_MS = 1_000;
/** Queue prefix suffix of the batch phase's API: no dispatcher claims its work. */
export const UNDELIVERED_SUFFIX = "-undelivered";

export interface Bench {
  root: string;
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  receiver: BenchReceiver;
  load: LoadGenerator;
  api: StartedProcess;
  dispatcher: StartedProcess;
  batchApi: StartedProcess;
  apiUrl: string;
  batchApiUrl: string;
  bareUrl: string;
  metricsUrl: string;
  /** Environment of forked helpers (the floor): trusts the receiver's certificate. */
  helperEnv: NodeJS.ProcessEnv;
  /** Environment of the API and the dispatcher (ports and QUEUE_PREFIX are theirs): the
   * neighbour phase starts its own from it. */
  serviceEnv: NodeJS.ProcessEnv;
  /** The receiver's certificate (localhost), which the services trust. */
  cert: LocalCertificate;
  single: { key: string; accountId: string; webhookId: string };
  fanout: { key: string; accountId: string };
}

async function post(url: string, key: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

export async function startBench(root: string, databaseUrl: string, redisUrl: string): Promise<Bench> {
  const prefix = `bench-${Date.now()}`;
  const cert = await ensureLocalCertificate(path.join(root, ".tmp/bench-certs"));
  const receiver = await startBenchReceiver(cert, RETRY_DELAY_MS);
  const [port, metricsPort, barePort, adminPort, batchPort, batchAdminPort] = await Promise.all([1, 2, 3, 4, 5, 6].map(() => freePort()));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: "production",
    NODE_OPTIONS: "",
    SECRET_ENCRYPTION_KEYS: randomBytes(32).toString("base64"),
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    QUEUE_PREFIX: prefix,
    PORT: String(port),
    ADMIN_PORT: String(adminPort),
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: "warn",
    ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
    NODE_EXTRA_CA_CERTS: cert.certPath,
    DELIVERY_RETRY_DELAYS_MS: `${RETRY_DELAY_MS},60000,300000`,
    RATE_LIMIT_PER_MINUTE: "0",
    DISPATCHER_CONCURRENCY: String(CONCURRENCY.dispatcher),
    DATABASE_POOL_SIZE: String(CONCURRENCY.pool),
  };
  const service = (name: "api" | "dispatcher", kind: string = name, extraEnv: NodeJS.ProcessEnv = {}) =>
    startChild(kind, [...profileFlags(root, kind), ...nodeFlagsOf(root, `start:${name}`), path.join(root, `apps/${name}/dist/main.js`)], {
      cwd: root,
      env: { ...env, ...extraEnv },
    });
  const api = service("api");
  const dispatcher = service("dispatcher");
  const batchApi = service("api", "api-batch", {
    PORT: String(batchPort),
    ADMIN_PORT: String(batchAdminPort),
    QUEUE_PREFIX: `${prefix}${UNDELIVERED_SUFFIX}`,
  });
  startChild(
    "bare express",
    [...nodeFlagsOf(root, "start:api"), "--conditions=source", "--import", "tsx", path.join(root, "bench/bare-express.ts")],
    {
      cwd: root,
      env: { ...env, PORT: String(barePort) },
    },
  );
  const apiUrl = `http://127.0.0.1:${port}`;
  const batchApiUrl = `http://127.0.0.1:${batchPort}`;
  await waitReady(`${apiUrl}/readyz`, "the API");
  await waitReady(`${batchApiUrl}/readyz`, "the batch phase's API");
  await waitReady(`http://127.0.0.1:${metricsPort}/healthz`, "the dispatcher");
  await waitReady(`http://127.0.0.1:${barePort}/healthz`, "the bare Express route");
  const load = startLoadGenerator(root, { ...process.env, NODE_OPTIONS: "" });

  log("registering webhooks");
  const prisma = createPrismaClient(databaseUrl, 2);
  const singleKey = await createApiKey(prisma, `${prefix}-single`);
  const fanoutKey = await createApiKey(prisma, `${prefix}-fanout`);
  await prisma.$disconnect();
  const hook = await post(`${apiUrl}/v1/webhooks`, singleKey.key, { url: receiver.url, events: ["message.sent"] });
  if (hook.status !== 201) throw new Error(`creating a webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
  for (let i = 0; i < 5; i++) {
    const r = await post(`${apiUrl}/v1/webhooks`, fanoutKey.key, { url: `${receiver.url}?n=${i}`, events: ["message.sent"] });
    if (r.status !== 201) throw new Error(`creating a webhook: ${r.status} ${JSON.stringify(r.body)}`);
  }
  return {
    root,
    databaseUrl,
    redisUrl,
    prefix,
    receiver,
    load,
    api,
    dispatcher,
    batchApi,
    apiUrl,
    batchApiUrl,
    bareUrl: `http://127.0.0.1:${barePort}`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    helperEnv: { ...process.env, NODE_OPTIONS: "", NODE_EXTRA_CA_CERTS: cert.certPath },
    serviceEnv: env,
    cert,
    single: { key: singleKey.key, accountId: singleKey.account_id, webhookId: hook.body.id },
    fanout: { key: fanoutKey.key, accountId: fanoutKey.account_id },
  };
}
