/**
 * `npm run demo [-- --mail-dir DIR]`: the main job, end to end, on this machine (CONTRACT.md
 * section 9). Applies the migrations, starts the API and a dispatcher as separate processes, and
 * an HTTPS reference receiver that verifies every signature; registers webhooks; feeds real
 * RFC 5322 messages through POST /v1/inboxes/{id}/messages and the other five kinds through
 * POST /v1/events; makes the receiver fail some deliveries so that retries and a failed event
 * happen; replays the failed event once its endpoint is back; and prints a report read back
 * from the API. Exits 1 when a signature did not verify
 * or an expected delivery is missing.
 */
import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { createPrismaClient, migrate, MIGRATIONS_DIR } from "@mailhooks/db";
import { ensureLocalCertificate, startReceiver, type Arrival } from "@mailhooks/receiver";
import { createApiKey } from "../../apps/api/src/services/api-keys.js";
import { ApiClient } from "./api-client.js";
import { freePort, ROOT, startProcess, stopProcess, waitForHttp } from "./processes.js";
import { printReport, type DemoFacts } from "./report.js";

const { values } = parseArgs({ options: { "mail-dir": { type: "string" } } });
const mailDir = path.resolve(values["mail-dir"] ?? path.join(ROOT, "samples/mail"));
const databaseUrl = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks";
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
// Shortened so that the demo's retries and its failed event happen within seconds; the
// service's defaults are the spec's 10 s, 60 s, 300 s.
const RETRY_DELAYS_MS = [500, 1_000, 1_500];
const INBOX = "support@inbox.example.net";

function log(line: string) {
  console.log(`demo: ${line}`);
}

/** Waits until the audit log holds `count` entries (one per replay, written once it ends). */
async function waitForAudit(api: ApiClient, count: number): Promise<any[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const entries = await api.listAll("/v1/audit-log");
    if (entries.length >= count) return entries;
    if (Date.now() > deadline) throw new Error(`audit log has ${entries.length} of ${count} entries after 30 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const children: ReturnType<typeof startProcess>[] = [];
let exitCode = 1;
const receiverCleanup: (() => Promise<void>)[] = [];

try {
  log(`migrating ${new URL(databaseUrl).pathname.slice(1)}`);
  await migrate(databaseUrl, MIGRATIONS_DIR);

  // The receiver's certificate is made before the dispatcher starts, which trusts it through
  // NODE_EXTRA_CA_CERTS exactly as an operator would configure a private CA.
  const cert = await ensureLocalCertificate(path.join(ROOT, ".tmp/demo-certs"));
  const secrets = new Map<string, Promise<string>>();
  const resolvers = new Map<string, (secret: string) => void>();
  for (const hook of ["/hooks/inbox", "/hooks/archive"]) secrets.set(hook, new Promise((resolve) => resolvers.set(hook, resolve)));
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
      if (arrival.event === "message.opened" || arrival.event === "message.delivered") {
        const key = `${arrival.event} ${arrival.messageId}`;
        if (!firstTries.has(key)) {
          firstTries.add(key);
          return { status: 500 };
        }
      }
      return { status: 200 };
    },
  });
  receiverCleanup.push(() => receiver.close());

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
    // The reference receiver listens on loopback, which is blocked by default.
    ALLOW_PRIVATE_TARGETS: "true",
    NODE_EXTRA_CA_CERTS: cert.certPath,
    LOG_LEVEL: "warn",
    LOG_FORMAT: "pretty",
  };
  log("starting the API and a dispatcher");
  children.push(startProcess("api", "apps/api/src/main.ts", env), startProcess("dispatcher", "apps/dispatcher/src/main.ts", env));
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForHttp(`${baseUrl}/readyz`);

  const prisma = createPrismaClient(databaseUrl, 1);
  const issued = await createApiKey(prisma, `demo-${randomUUID().slice(0, 8)}`, "demo");
  await prisma.$disconnect();
  const api = new ApiClient(baseUrl, issued.key);
  log(`account ${issued.account_id}, API key ${issued.id}`);

  const inboxHook = await api.request("POST", "/v1/webhooks", { url: receiver.url("/hooks/inbox"), events: ["message.sent", "message.delivered", "message.opened", "message.clicked", "message.received", "message.bounced"] });
  const archiveHook = await api.request("POST", "/v1/webhooks", { url: receiver.url("/hooks/archive"), events: ["message.clicked"] });
  if (inboxHook.status !== 201 || archiveHook.status !== 201) throw new Error(`webhook registration failed: ${JSON.stringify([inboxHook.body, archiveHook.body])}`);
  resolvers.get("/hooks/inbox")!(inboxHook.body.secret);
  resolvers.get("/hooks/archive")!(archiveHook.body.secret);
  log(`webhooks ${inboxHook.body.id} (all six kinds) and ${archiveHook.body.id} (message.clicked, endpoint down)`);

  const files = (await readdir(mailDir)).filter((f) => f.endsWith(".eml")).sort();
  if (files.length === 0) throw new Error(`no .eml files in ${mailDir}`);
  const eventIds: string[] = [];
  let firstReceived: { messageId: string; threadId: string; from: string; to: string[]; subject: string } | null = null;
  for (const file of files) {
    const raw = await readFile(path.join(mailDir, file));
    const res = await api.request("POST", `/v1/inboxes/${encodeURIComponent(INBOX)}/messages`, raw, "message/rfc822");
    if (res.status !== 201) {
      log(`${file}: ${res.status} ${res.body?.error?.message ?? ""} (skipped)`);
      continue;
    }
    eventIds.push(res.body.event_id);
    log(`${file} -> ${res.body.event_type} ${res.body.event_id}`);
    if (!firstReceived && res.body.event_type === "message.received") {
      const detail = await api.request("GET", `/v1/events/${res.body.event_id}`);
      const d = detail.body.payload.data;
      firstReceived = { messageId: d.messageId, threadId: d.threadId, from: d.from, to: d.to, subject: d.subject };
    }
  }

  // The other five kinds, as the email platform would publish them about one outgoing message.
  const outgoing = {
    messageId: `<${randomUUID()}@inbox.example.net>`,
    threadId: firstReceived?.threadId ?? "thr_demo",
    inboxId: INBOX,
    from: INBOX,
    to: [firstReceived?.from ?? "alice@example.com"],
    subject: `Re: ${firstReceived?.subject ?? "hello"}`,
  };
  const at = (offsetS: number) => new Date(Date.now() + offsetS * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  const others: [string, Record<string, unknown>][] = [
    ["message.sent", { status: "sent" }],
    ["message.delivered", { status: "delivered", deliveredAt: at(1) }],
    ["message.opened", { openCount: 1, openedAt: at(2) }],
    ["message.clicked", { url: "https://example.com/pricing", clickCount: 1, clickedAt: at(3) }],
    ["message.bounced", { to: ["nobody@example.org"], bounceType: "hard", bounceCode: "5.1.1", bounceMessage: "550 5.1.1 User unknown", bouncedAt: at(4) }],
  ];
  for (const [eventType, own] of others) {
    const res = await api.request("POST", "/v1/events", { event_type: eventType, data: { ...outgoing, ...own } }, "application/json");
    if (res.status !== 201) throw new Error(`POST /v1/events ${eventType}: ${res.status} ${JSON.stringify(res.body)}`);
    eventIds.push(res.body.event_id);
    log(`${eventType} -> ${res.body.event_id}`);
  }

  log("waiting for every event to be delivered or failed (retries included)");
  const deadline = Date.now() + 60_000;
  let details: any[] = [];
  for (;;) {
    details = await Promise.all(eventIds.map(async (id) => (await api.request("GET", `/v1/events/${id}`)).body));
    if (details.every((d) => d.status !== "pending")) break;
    if (Date.now() > deadline) throw new Error("events still pending after 60 s");
    await new Promise((r) => setTimeout(r, 250));
  }

  const failedBeforeReplay = details.filter((d) => d.status === "failed").map((d) => d.event_id as string);
  log(`failed: ${failedBeforeReplay.join(", ") || "none"}; bringing /hooks/archive back and replaying`);
  archive.up = true;
  // Only the destinations that failed are replayed: the others already have the event.
  let replays = 0;
  for (const event of details.filter((d) => d.status === "failed")) {
    for (const dest of event.destinations.filter((d: any) => d.status === "failed")) {
      const res = await api.request("POST", `/v1/events/${event.event_id}/replay`, { webhook_id: dest.webhook_id });
      if (res.status !== 202) throw new Error(`replay of ${event.event_id}: ${res.status} ${JSON.stringify(res.body)}`);
      replays += res.body.replays.length;
    }
  }
  const audit = await waitForAudit(api, replays);
  details = await Promise.all(eventIds.map(async (id) => (await api.request("GET", `/v1/events/${id}`)).body));

  const deliveries = await api.listAll("/v1/deliveries");
  const facts: DemoFacts = { events: details, failedBeforeReplay, audit, deliveries, arrivals: receiver.arrivals as Arrival[] };
  exitCode = printReport(facts) ? 0 : 1;
} catch (error) {
  console.error(`demo: FAILED: ${(error as Error).message}`);
  exitCode = 1;
} finally {
  await Promise.all(children.map((c) => stopProcess(c)));
  for (const cleanup of receiverCleanup) await cleanup();
  process.exit(exitCode);
}
