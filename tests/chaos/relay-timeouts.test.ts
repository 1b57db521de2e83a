import { verify } from "@mailhooks/verify";
import { PRODUCER_COMMAND_TIMEOUT_MS } from "@mailhooks/queue";
import { CLAIM_TIMEOUT_MS } from "../../apps/dispatcher/src/relay.js";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { at, createHook, deliveryRows, emailArrivals, startHookReceiver, type CreatedHook, type HookReceiver } from "../support/hooks.js";
import { databaseUrlVia, killAll, removeMaintenanceQueue, startDispatcher, type ServiceProcess } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";

/**
 * A relay that stops half-way through its work holds the others back for a bounded time only
 * (apps/dispatcher/src/relay.ts, docs/scheduler.md):
 * - its Redis stops answering (a frozen server, a half-open link) after it claimed work: its push
 *   times out (PRODUCER_COMMAND_TIMEOUT_MS) and it gives the claimed work back at once, well
 *   before the leases would expire; another dispatcher's relay claims it and delivers it, once;
 * - its process stops (SIGSTOP: its host gone) while it holds the deployment's claim lock:
 *   PostgreSQL ends its transaction after CLAIM_TIMEOUT_MS (idle_in_transaction_session_timeout),
 *   and the other relays' claims, which waited for the lock, go on: the work arrives, signed, once.
 *
 * Dispatcher A reaches Redis (first test) or PostgreSQL (second test) through a TCP proxy;
 * dispatcher B reaches both directly.
 */
const EVENTS = 3;
/** The visibility timeout in the first test: longer than the push's timeout and the room below, so that only a give-back lets B have the work in time. */
const LONG_VISIBILITY_MS = 30_000;
/** Room on a loaded machine for B's claim (B's relay passes at least every third of its visibility timeout), its jobs and the deliveries. */
const ROOM_MS = 15_000;

describe("a relay that stops half-way", () => {
  let stack: Stack;
  const proxies: TcpProxy[] = [];
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(async () => {
    await killAll();
    for (const proxy of proxies) await proxy.close();
    if (stack) await removeMaintenanceQueue(stack.prefix);
    await stack?.close();
  });

  /** An account with a webhook on a receiver of its own; returns once its test event arrived (a dispatcher delivers). */
  async function hookOf(path: string): Promise<{ hr: HookReceiver; hook: CreatedHook; acct: Account }> {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, path, ["message.sent"]);
    await hr.receiver.waitFor((all) => at(all, path, "webhook.test").length === 1, 30_000);
    return { hr, hook, acct };
  }

  /** Posts EVENTS events in one request (one transaction: one notification, claimed together); their ids. */
  async function postEvents(acct: Account): Promise<string[]> {
    const events = Array.from({ length: EVENTS }, () => ({ event_type: "message.sent", data: sampleData("message.sent") }));
    const posted = await acct.api("POST", "/v1/events/batch", { events });
    expect(posted.status).toBe(201);
    return (posted.body.data as { event_id: string }[]).map((e) => e.event_id);
  }

  /** The work_items rows of the destinations of `eventIds`: each one's lease number and whether it is leased now. */
  const workOf = async (eventIds: string[]) =>
    (
      await stack.pool.query<{ lease: number; leased: boolean }>(
        `SELECT q.lease, q.leased_until > now() AS leased FROM work_items q JOIN destinations d ON d.id = q.work_id
          WHERE d.event_id = ANY($1) ORDER BY q.id`,
        [eventIds],
      )
    ).rows;

  async function expectDeliveredOnce(acct: Account, hr: HookReceiver, hook: CreatedHook, path: string, eventIds: string[]) {
    const arrivals = emailArrivals(hr.receiver.arrivals, path);
    expect(arrivals).toHaveLength(EVENTS);
    for (const arrival of arrivals)
      expect(
        verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
          now: new Date(arrival.receivedAt),
        }),
      ).toEqual(JSON.parse(arrival.body));
    for (const eventId of eventIds) {
      const detail = await waitUntil(
        () => acct.api("GET", `/v1/events/${eventId}`),
        (r) => r.body.status !== "pending",
        10_000,
      );
      expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
      expect((await deliveryRows(acct, { event_id: eventId })).map((r) => [r.trigger, r.attempt, r.response_status])).toEqual([
        ["initial", 0, 200],
      ]);
    }
    expect(await workOf(eventIds)).toEqual([]);
  }

  test("whose Redis stops answering gives its claimed work back: another dispatcher delivers it within the push's timeout, long before the leases would expire", async () => {
    const direct = new URL(testRedisUrl());
    const proxy = await startTcpProxy({ host: direct.hostname, port: Number(direct.port || 6379) });
    proxies.push(proxy);
    const env = (redisUrl: string) => ({
      QUEUE_PREFIX: stack.prefix,
      REDIS_URL: redisUrl,
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(LONG_VISIBILITY_MS),
    });
    const a = startDispatcher("dispatcher-a", env(`redis://127.0.0.1:${proxy.port}`));
    const { hr, hook, acct } = await hookOf("/frozen-redis");

    // A's link to Redis freezes; A alone runs, claims the events and cannot push their jobs.
    proxy.freeze();
    const eventIds = await postEvents(acct);
    await waitUntil(
      () => workOf(eventIds),
      (rows) => rows.length === EVENTS && rows.every((r) => r.leased),
      10_000,
      20,
    );
    const claimedAt = Date.now();
    // What becomes of the claimed rows meanwhile (lease number, leased or not), told if the bound fails.
    const history: string[] = [];
    let last = "";
    const sampler = setInterval(() => {
      void workOf(eventIds).then(
        (rows) => {
          const now = rows.map((r) => `${r.lease}${r.leased ? " leased" : " waiting"}`).join(", ");
          if (now !== last) history.push(`${Date.now() - claimedAt} ms: ${now}`);
          last = now;
        },
        () => undefined,
      );
    }, 20);
    // B, on a working link, starts.
    const b = startDispatcher("dispatcher-b", env(testRedisUrl()));
    try {
      await hr.receiver.waitFor((all) => emailArrivals(all, "/frozen-redis").length >= EVENTS, 90_000);
    } finally {
      clearInterval(sampler);
    }
    const tookMs = Date.now() - claimedAt;
    console.log(`delivered by the other dispatcher ${tookMs} ms after A claimed the work with its Redis frozen`);
    // Given back when its push timed out, and taken by B then: not at the leases' expiry, nor
    // whenever B's claim happens to fall between two claims of A.
    if (tookMs >= PRODUCER_COMMAND_TIMEOUT_MS + ROOM_MS) console.log(`the claimed rows (lease, state) over time:\n${history.join("\n")}`);
    expect(tookMs).toBeLessThan(PRODUCER_COMMAND_TIMEOUT_MS + ROOM_MS);
    await expectDeliveredOnce(acct, hr, hook, "/frozen-redis", eventIds);
    expect(a.running()).toBe(true);
    expect(b.running()).toBe(true);
  }, 150_000);

  test("whose process stops while it holds the claim lock holds the others back no longer than CLAIM_TIMEOUT_MS: another dispatcher delivers", async () => {
    await killAll();
    const direct = new URL(testDatabaseUrl());
    // A's link to PostgreSQL answers late, so that each of its claims holds the lock long enough to be caught holding it.
    const proxy = await startTcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) }, { replyDelayMs: 150 });
    proxies.push(proxy);
    const appName = `relay-timeouts-a-${process.pid}`;
    const viaProxy = new URL(databaseUrlVia(proxy.port));
    viaProxy.searchParams.set("application_name", appName);
    // A claims often (a heartbeat, then a claim, every third of its visibility timeout).
    const a: ServiceProcess = startDispatcher("dispatcher-a2", {
      QUEUE_PREFIX: stack.prefix,
      DATABASE_URL: viaProxy.toString(),
      DISPATCHER_VISIBILITY_TIMEOUT_MS: "600",
    });
    const b = startDispatcher("dispatcher-b2", { QUEUE_PREFIX: stack.prefix });
    const { hr, hook, acct } = await hookOf("/frozen-relay");

    /** The backend of A that holds the deployment's claim lock, if one does now. */
    const holder = async () =>
      (
        await stack.pool.query<{ pid: number }>(
          `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND s.application_name = $1`,
          [appName],
        )
      ).rows[0]?.pid ?? null;
    // Stop A dead while it holds the lock: none of its own timers can fire now.
    let heldBy: number | null = null;
    for (let tries = 0; heldBy === null && tries < 20; tries++) {
      await waitUntil(holder, (pid) => pid !== null, 30_000, 5);
      a.child.kill("SIGSTOP");
      heldBy = await holder();
      if (heldBy === null) a.child.kill("SIGCONT");
    }
    expect(heldBy).not.toBeNull();
    const stoppedAt = Date.now();

    // B's claims wait for the lock; PostgreSQL ends A's transaction, and B's claim goes on.
    const eventIds = await postEvents(acct);
    await hr.receiver.waitFor((all) => emailArrivals(all, "/frozen-relay").length >= EVENTS, CLAIM_TIMEOUT_MS + ROOM_MS);
    console.log(`delivered by the other dispatcher ${Date.now() - stoppedAt} ms after A stopped holding the claim lock`);
    // A's session is gone (its stopped process still holds the socket).
    expect(await holder()).toBeNull();
    const { rows } = await stack.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1", [heldBy]);
    expect(rows[0].n).toBe(0);
    await expectDeliveredOnce(acct, hr, hook, "/frozen-relay", eventIds);
    expect(b.running()).toBe(true);
  }, 120_000);
});
