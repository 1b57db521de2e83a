import { dispatcherConfigSchema, loadConfig } from "@mailhooks/config";
import { testRedisUrl } from "../support/env.js";
import { startInProcessDispatcher, type InProcessDispatcher } from "../support/delivery-worker.js";
import { createHook, startHookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { endChaosFile } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

/**
 * Issue 18, item 6 (crash-safe bookkeeping): a job whose work ends before the relay's claim
 * commits.
 *
 * The relay writes a job's lease in the transaction that claims its outbox row and commits once
 * Redis has taken the job (packages/delivery-state/src/outbox.ts). A worker may run the job and
 * record its end in that moment; the lease it should end is not committed yet, so it cannot see
 * it, and the lease then outlives its work: the webhook believes it holds a job it does not.
 *
 * The test makes that moment long: the relay (a dispatcher of its own) reaches Redis through a
 * proxy that hands it Redis's answers REPLY_DELAY_MS late, so Redis has the job, and the worker of
 * another dispatcher (direct to Redis) has run it, before the relay hears that the push succeeded
 * and commits (on a busy machine the attempt may take longer: then the next event is tried). The lease keeper is kept out of it (a stalled interval longer than the
 * test): what ends the lease must be the worker, which looks for it again LATE_LEASE_RELEASE_MS
 * (1 s) after the work ended. The webhook's job limit is 1, so a lease left behind holds its next
 * event in the outbox.
 */
const REPLY_DELAY_MS = 400;
/** Longer than the test: no pass of the lease keeper runs while it does. */
const STALLED_MS = 120_000;

describe("a job whose work ends before the relay's claim commits", () => {
  let stack: Stack | undefined;
  let proxy: TcpProxy | undefined;
  const dispatchers: InProcessDispatcher[] = [];

  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
    const redis = new URL(testRedisUrl());
    proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) }, { replyDelayMs: REPLY_DELAY_MS });
    const config = (redisUrl: string) =>
      loadConfig(dispatcherConfigSchema, {
        DATABASE_URL: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test",
        REDIS_URL: redisUrl,
        QUEUE_PREFIX: stack!.prefix,
        ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
        DISPATCHER_CONCURRENCY: "16",
        DISPATCHER_WEBHOOK_JOB_LIMIT: "1",
        DISPATCHER_LOCK_DURATION_MS: String(STALLED_MS),
        DISPATCHER_STALLED_INTERVAL_MS: String(STALLED_MS),
        WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0",
      });
    const viaProxy = new URL(testRedisUrl());
    viaProxy.port = String(proxy.port);
    const where = { queuePrefix: stack.prefix, keyPrefix: stack.keyPrefix };
    dispatchers.push(startInProcessDispatcher(stack.pool, config(viaProxy.toString()), { ...where, parts: "relay-only" }));
    dispatchers.push(startInProcessDispatcher(stack.pool, config(testRedisUrl()), { ...where, parts: "worker-only" }));
  }, 60_000);

  afterAll(async () => {
    await endChaosFile(
      stack,
      async () => {
        for (const dispatcher of dispatchers) await dispatcher.close();
      },
      () => proxy?.close(),
    );
  }, 60_000);

  const leasesOf = async (destinationId: string) =>
    (await stack!.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_leases WHERE work_id = $1", [destinationId])).rows[0].n;

  /** Posts a message.sent event; returns its id. */
  const post = async (account: Account) => {
    const posted = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    return posted.body.event_id as string;
  };

  const delivered = (account: Account, eventId: string, ms: number) =>
    waitUntil(
      () => account.api("GET", `/v1/events/${eventId}`),
      (r) => r.status === 200 && r.body.status === "delivered",
      ms,
      10,
    );

  test("the lease that came into sight after its work ended is ended by the worker a moment later, and the webhook's next event goes", async () => {
    const account = await stack!.newAccount();
    const receiver = await startHookReceiver(stack!);
    await createHook(account, receiver, "/quick", ["message.sent"]);

    // The race needs the attempt recorded within REPLY_DELAY_MS of Redis taking the job: a busy
    // machine (or the first TLS handshake) may miss it, so a few events are tried, each after
    // the last one's lease is gone (the webhook's job limit is 1).
    let raced = 0;
    for (let i = 0; i < 5 && raced === 0; i++) {
      const eventId = await post(account);
      await delivered(account, eventId, 30_000);
      const { rows } = await stack!.pool.query<{ id: string }>("SELECT id FROM destinations WHERE event_id = $1", [eventId]);
      const destinationId = rows[0].id;
      // The race happened when the relay committed the lease after the work had ended: it is there, with the event delivered.
      const seen = await waitUntil(
        () => leasesOf(destinationId),
        (n) => n === 1,
        2_000,
        10,
      ).then(
        () => true,
        () => false,
      );
      if (seen) raced++;
      // The worker's second look ends it, long before any pass of the lease keeper.
      await waitUntil(
        () => leasesOf(destinationId),
        (n) => n === 0,
        10_000,
        10,
      );
    }
    expect(raced).toBe(1);
    // The webhook holds no job it does not have: its next event is relayed and delivered.
    await delivered(account, await post(account), 10_000);
  }, 90_000);
});
