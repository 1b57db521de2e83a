/**
 * `npm run demo [-- --mail-dir DIR] [--keep]`: the main job, end to end, on this machine
 * (README.md, "The two commands"). Starts an embedded PostgreSQL and a redis-server when nothing answers
 * at DATABASE_URL or REDIS_URL; applies the migrations, starts the API and a dispatcher as
 * separate processes, and an HTTPS reference receiver that verifies every signature; registers
 * webhooks (one of them scoped to one inbox, one subscribed to the operational events); feeds real RFC 5322 messages to two inboxes through
 * POST /v1/inboxes/{id}/messages and the other five kinds through POST /v1/events; makes the receiver fail some deliveries so that retries and
 * a failed event happen; replays the failed event once its endpoint is back; and prints a report
 * read back from the API. Exits 1 when a signature did not verify, an expected delivery is
 * missing, the scoped webhook received an event of another inbox or missed one of its own, or the
 * operations webhook did not receive `destination.failed` for the failed event. With --keep, everything stays up after the report until Ctrl-C.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import { createPrismaClient, migrate, MIGRATIONS_DIR } from "@mailhooks/db";
import { ensureLocalCertificate, startReceiver } from "@mailhooks/receiver";
import { createApiKey } from "@mailhooks/access";
import { createCommand } from "@mailhooks/command-line";
import { apiConfigSchema, loadConfig } from "@mailhooks/config";
import { EVENT_TYPES, OPERATIONAL_EVENT_TYPES } from "@mailhooks/events";
import { createApiClient, dataOf, listAll, type Schemas } from "@mailhooks/api-client";
import { keepLines, NOT_KEPT_LINE } from "./keep.js";
import { freePort, startNode, waitForHttp, type StartedProcess } from "@mailhooks/processes";
import { ROOT } from "./root.js";
import { printReport, type DemoFacts } from "./report.js";
import { getEvent, waitForAudit, waitForOperational, waitForSettled } from "./read-back.js";
import { ensureServices, MissingService } from "./services.js";
import { feedMail, replyEvents } from "./traffic.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

// Where the demo looks for PostgreSQL and Redis first: the service's own variables and defaults.
const environment = apiConfigSchema.pick({ DATABASE_URL: true, REDIS_URL: true });
const options = createCommand({
  name: "npm run demo --",
  description:
    "The main job on real input, end to end, on this machine: migrations, the API, a dispatcher and an HTTPS reference receiver; a webhook; RFC 5322 messages and the other five kinds of events; failed deliveries, retries and a replay; then a report read back from the API. Starts an embedded PostgreSQL or a redis-server when nothing answers at DATABASE_URL or REDIS_URL. Exits 1 when a check of the report fails.",
  examples: ["npm run demo", "npm run demo -- --mail-dir ~/Mail/export --keep"],
  environment,
})
  .option("--mail-dir <DIR>", "a folder of .eml files to feed (default: samples/mail)")
  .option("--keep", "leave everything running after the report (Ctrl-C stops it), with a dashboard sign-in link")
  .action(() => undefined)
  .parse(process.argv)
  .opts<{ mailDir?: string; keep?: boolean }>();
const mailDir = path.resolve(options.mailDir ?? path.join(ROOT, "samples/mail"));
const keep = options.keep ?? false;
// Shortened so that the demo's retries and its failed event happen within seconds; the
// service's defaults are the spec's 10 s, 60 s, 300 s.
const RETRY_DELAYS_MS = [500, 1_000, 1_500];
const INBOX = "support@inbox.example.net";
// Every third message goes here instead, so that the webhook scoped to INBOX has events to leave out.
const OTHER_INBOX = "sales@inbox.example.net";

function log(line: string) {
  console.log(`demo: ${line}`);
}

const children: StartedProcess[] = [];
let exitCode = 1;
/** Undone in reverse order: the API and the dispatcher stop before their database and Redis. */
const cleanups: (() => Promise<unknown>)[] = [];
let finishing = false;

/** Stops everything the demo started, then exits; later calls (a second Ctrl-C) wait for the first. */
async function finish(code: number): Promise<never> {
  if (!finishing) {
    finishing = true;
    for (const cleanup of cleanups.reverse())
      await cleanup().catch((error) => console.error(`demo: while stopping: ${(error as Error).message}`));
    process.exit(code);
  }
  return new Promise<never>(() => {});
}
// Without --keep a signal interrupts the demo (128 + signal number); with --keep, once the report
// is out, Ctrl-C is the ordinary end and the exit code stays the report's.
let reportDone = false;
for (const [signal, number] of [
  ["SIGINT", 2],
  ["SIGTERM", 15],
  ["SIGHUP", 1],
] as const) {
  process.on(signal, () => {
    if (!finishing) log(`${signal}: stopping`);
    void finish(keep && reportDone ? exitCode : 128 + number);
  });
}

try {
  const started: string[] = [];
  const configured = loadConfig(environment, process.env);
  const { databaseUrl, redisUrl } = await ensureServices(
    { databaseUrl: configured.DATABASE_URL, redisUrl: configured.REDIS_URL },
    (service, absentAt) => {
      cleanups.push(service.stop);
      started.push(service.description);
      log(`nothing answers at ${absentAt}: started ${service.description}`);
    },
  );
  log(`migrating ${new URL(databaseUrl).pathname.slice(1)}`);
  await migrate(databaseUrl, MIGRATIONS_DIR);

  // The receiver's certificate is made before the dispatcher starts, which trusts it through
  // NODE_EXTRA_CA_CERTS exactly as an operator would configure a private CA.
  const cert = await ensureLocalCertificate(path.join(ROOT, ".tmp/demo-certs"));
  const secrets = new Map<string, Promise<string>>();
  const resolvers = new Map<string, (secret: string) => void>();
  for (const hook of ["/hooks/inbox", "/hooks/archive", "/hooks/support", "/hooks/operations"])
    secrets.set(hook, new Promise((resolve) => resolvers.set(hook, resolve)));
  const firstTries = new Set<string>();
  const archive = { up: false };
  const receiver = await startReceiver({
    cert: cert.cert,
    key: cert.key,
    secretFor: (p) => secrets.get(p),
    behavior: (arrival) => {
      // /hooks/archive is down until the demo brings it back: its event ends failed after the
      // last retry, and is then replayed.
      if (arrival.path === "/hooks/archive" && !archive.up && arrival.event !== "webhook.test") return { status: 503 };
      // /hooks/inbox fails the first try of every opened and delivered event: a retry fixes it.
      if (arrival.path === "/hooks/inbox" && (arrival.event === "message.opened" || arrival.event === "message.delivered")) {
        const key = `${arrival.event} ${arrival.messageId}`;
        if (!firstTries.has(key)) {
          firstTries.add(key);
          return { status: 500 };
        }
      }
      return { status: 200 };
    },
  });
  cleanups.push(() => receiver.close());

  const port = await freePort();
  const metricsPort = await freePort();
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    QUEUE_PREFIX: `demo-${Date.now()}`,
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    DELIVERY_RETRY_DELAYS_MS: RETRY_DELAYS_MS.join(","),
    DELIVERY_TIMEOUT_MS: "5000",
    // The reference receiver listens on loopback, which is blocked by default: only loopback is allowed.
    ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
    NODE_EXTRA_CA_CERTS: cert.certPath,
    LOG_LEVEL: "warn",
    LOG_FORMAT: "pretty",
  };
  log("starting the API and a dispatcher");
  // Separate OS processes from source (tsx), each line of their output shown as `  [api] ...`.
  const service = (name: string, entry: string) => startNode(name, path.join(ROOT, entry), { cwd: ROOT, env, output: "prefix" });
  children.push(service("api", "apps/api/src/main.ts"), service("dispatcher", "apps/dispatcher/src/main.ts"));
  cleanups.push(() => Promise.all(children.map((c) => c.stop())));
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForHttp(`${baseUrl}/readyz`);

  const prisma = createPrismaClient(databaseUrl, 1);
  const issued = await createApiKey(prisma, `demo-${randomUUID().slice(0, 8)}`, "demo");
  await prisma.$disconnect();
  const api = createApiClient({ baseUrl, apiKey: issued.key });
  log(`account ${issued.account_id}, API key ${issued.id}`);

  const register = async (url: string, events: Schemas["Webhook"]["events"], inboxIds: string[] | null = null) =>
    dataOf(await api.POST("/v1/webhooks", { body: { url, events, inbox_ids: inboxIds } }));
  const allKinds: Schemas["Webhook"]["events"] = [...EVENT_TYPES];
  const inboxHook = await register(receiver.url("/hooks/inbox"), allKinds);
  const archiveHook = await register(receiver.url("/hooks/archive"), ["message.clicked"]);
  // docs/api.md, "Webhooks": an event becomes a destination of this one only when its inbox_id is INBOX.
  const scopedHook = await register(receiver.url("/hooks/support"), allKinds, [INBOX]);
  resolvers.get("/hooks/inbox")!(inboxHook.secret);
  resolvers.get("/hooks/archive")!(archiveHook.secret);
  // docs/api.md, "Operational events": told about the other webhooks (the archive's failed event).
  const operationsHook = await register(receiver.url("/hooks/operations"), [...OPERATIONAL_EVENT_TYPES]);
  resolvers.get("/hooks/support")!(scopedHook.secret);
  resolvers.get("/hooks/operations")!(operationsHook.secret);
  log(
    `webhooks ${inboxHook.id} (all six kinds), ${archiveHook.id} (message.clicked, endpoint down), ${scopedHook.id} (all six kinds, inbox ${INBOX} only) and ${operationsHook.id} (the operational events)`,
  );

  const { eventIds, firstReceived } = await feedMail(api, mailDir, [INBOX, OTHER_INBOX], log);
  // The other five kinds, as the email platform would publish them about one outgoing message.
  for (const event of replyEvents(INBOX, firstReceived)) {
    const accepted = dataOf(await api.POST("/v1/events", { body: event }));
    eventIds.push(accepted.event_id);
    log(`${event.event_type} -> ${accepted.event_id}`);
  }

  log("waiting for every event to be delivered or failed (retries included)");
  let details = await waitForSettled(api, eventIds);

  const failedBeforeReplay = details.filter((d) => d.status === "failed").map((d) => d.event_id);
  log(`failed: ${failedBeforeReplay.join(", ") || "none"}; bringing /hooks/archive back and replaying`);
  archive.up = true;
  // Only the destinations that failed are replayed: the others already have the event.
  let replays = 0;
  for (const event of details.filter((d) => d.status === "failed")) {
    for (const dest of event.destinations.filter((d) => d.status === "failed")) {
      const accepted = dataOf(
        await api.POST("/v1/events/{event_id}/replay", {
          params: { path: { event_id: event.event_id } },
          body: { webhook_id: dest.webhook_id },
        }),
      );
      replays += accepted.replays.length;
    }
  }
  const audit = await waitForAudit(api, replays);
  details = await Promise.all(eventIds.map((id) => getEvent(api, id)));
  // The failed event's destination.failed (made when it failed) is delivered meanwhile.
  const operational = await waitForOperational(
    api,
    (events) =>
      failedBeforeReplay.every((id) =>
        events.some(
          (e) => e.event_type === "destination.failed" && e.payload?.event === "destination.failed" && e.payload.data.eventId === id,
        ),
      ),
    15_000,
  );

  const deliveries = await listAll(api, "/v1/deliveries");
  const scoped = {
    webhookId: scopedHook.id,
    inboxId: INBOX,
    deliveries: await listAll(api, "/v1/deliveries", { webhook_id: scopedHook.id }),
  };
  const facts: DemoFacts = {
    events: details,
    failedBeforeReplay,
    audit,
    deliveries,
    arrivals: receiver.arrivals,
    webhooks: 4,
    scoped,
    operations: { webhookId: operationsHook.id, path: "/hooks/operations", events: operational },
  };
  exitCode = printReport(facts) ? 0 : 1;
  reportDone = true;

  const context = { baseUrl, apiKey: issued.key, accountId: issued.account_id, databaseUrl, redisUrl, started };
  // Without --keep everything stops right after the report: a sign-in link would not work, so
  // the last line says how to get one. With --keep the link is the last line printed.
  if (!keep) console.log(NOT_KEPT_LINE);
  if (keep) {
    for (const line of await keepLines(context)) console.log(line);
    // Kept running means kept watched: a process that dies ends the demo instead of leaving half of it.
    await new Promise<void>((resolve) => {
      children.forEach(
        (child, i) =>
          void child.exited.then(({ code, signal }) => {
            if (finishing) return;
            log(`${["the API", "the dispatcher"][i]} exited (${signal ?? code}); stopping everything`);
            resolve();
          }),
      );
    });
    exitCode = 1;
  }
} catch (error) {
  // After a signal the processes go away under the demo's feet: that is not a failure to report.
  if (!finishing) console.error(error instanceof MissingService ? error.message : `demo: FAILED: ${(error as Error).message}`);
  exitCode = 1;
}
await finish(exitCode);
