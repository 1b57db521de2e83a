import { verify } from "@mailhooks/verify";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack } from "../support/stack.js";
import { Queue } from "bullmq";
import { createRedisConnection, QUEUE_NAMES } from "@mailhooks/queue";
import { apiAs, createHook, deliveryRows, eventOf, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { killAll, removeMaintenanceQueue, startDispatcher, waitForOutput, type ServiceProcess } from "./support/processes.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * docs/api.md, "Accepted means delivered": with Redis down, every accept path answers
 * 201/202 (a webhook with its test event, an event, a raw message, a batch, a replay), because
 * acceptance is one PostgreSQL transaction with its work_items rows; while Redis is down the
 * dispatcher's relay gives back what it claims (its push fails) and keeps trying; once Redis is
 * back, its claim's jobs reach the queue, and each piece arrives once, signed.
 *
 * Redis is a throwaway redis-server of this test, stopped and started again; never the system one.
 */
describe("accepted while Redis is down, delivered once it is back", () => {
  let redisServer: RedisServer;
  let stack: Stack;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url }, dispatcher: false });
  });
  afterAll(async () => {
    await killAll();
    if (stack) await removeMaintenanceQueue(stack.prefix, redisServer.url).catch(() => undefined);
    await stack?.close();
    await redisServer?.destroy();
  });

  test("webhook + test event, event, raw message, batch and replay: 201/202 while down, each delivered once after", async () => {
    const dispatcher = startDispatcher("dispatcher", {
      REDIS_URL: redisServer.url,
      QUEUE_PREFIX: stack.prefix,
      LOG_LEVEL: "info",
    });
    await waitForOutput(dispatcher, "dispatcher started");
    await redisServer.stop();
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect([ready.status, ready.body.checks]).toEqual([200, { postgres: "ok", redis: "unavailable" }]);

    const hr = await startHookReceiver(stack);
    const hook = await createHook(stack, hr, "/down", ["message.sent", "message.received"]);
    expect(hook.body.secret).toMatch(/^whsec_/);
    const single = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(single.status).toBe(201);
    const raw = "From: a@example.com\r\nTo: inbox@example.net\r\nSubject: hi\r\nMessage-ID: <down-1@example.com>\r\n\r\nbody\r\n";
    const inbound = await stack.api("POST", "/v1/inboxes/inbox@example.net/messages", raw, { "content-type": "message/rfc822" });
    expect(inbound.status).toBe(201);
    const batch = await stack.api("POST", "/v1/events/batch", {
      events: [
        { event_type: "message.sent", data: sampleData("message.sent") },
        { event_type: "message.sent", data: sampleData("message.sent") },
      ],
    });
    expect(batch.status).toBe(201);
    // To the webhook's URL with a query added: the same receiver path and secret, but not the
    // webhook's own URL. A successful replay to the own URL makes the destination `delivered`
    // (docs/api.md, "Events"); queued beside the event's initial attempt, it sometimes ended first
    // (3 runs in about 80, the replay's row before every initial one), and the initial attempt
    // then found the destination delivered and sent nothing, so the event's arrival count
    // depended on the order. A replay elsewhere leaves the destination to its initial attempt.
    const replay = await stack.api("POST", `/v1/events/${single.body.event_id}/replay`, { target_url: `${hook.url}?replay=1` });
    expect(replay.status).toBe(202);
    const eventIds = [single.body.event_id, inbound.body.event_id, ...batch.body.data.map((e: any) => e.event_id)];
    // Nothing can have been sent yet.
    expect(hr.receiver.arrivals).toHaveLength(0);

    await redisServer.start();
    const back = Date.now();
    // Every piece of work ended within seconds of the restart (the relay's next try: its pause
    // after failures is 5 s at most): the 4 events delivered, the test event's and the replay's
    // rows written. Past 30 s the test prints what it sees (diagnosis below) and waits up to
    // 120 s, and a failure carries the same picture.
    const ended = async () => {
      const statuses = await Promise.all(eventIds.map(async (id) => (await stack.api("GET", `/v1/events/${id}`)).body.status));
      const triggers = (await deliveryRows(stack, { webhook_id: hook.id })).map((r) => r.trigger);
      return statuses.every((s) => s === "delivered") && triggers.includes("test") && triggers.includes("replay");
    };
    await waitUntil(ended, Boolean, 30_000, 100).catch(async () => {
      console.warn(await diagnosis(stack, redisServer, dispatcher, hr, hook.id, eventIds, back));
      await waitUntil(ended, Boolean, 90_000, 250).catch(async (error: Error) => {
        throw new Error(`${error.message}\n${await diagnosis(stack, redisServer, dispatcher, hr, hook.id, eventIds, back)}`);
      });
    });
    // Nothing is left to claim: nothing can arrive twice. (Bounded absence check besides.)
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE queue_prefix = $1", [stack.prefix])).rows[0].n).toBe(0);
    await expect(hr.receiver.waitFor((all) => all.length > 6, 1_500)).rejects.toThrow(TIMED_OUT);
    const arrivals = hr.receiver.arrivals;
    expect(arrivals).toHaveLength(6);
    expect(arrivals.map(eventOf).sort()).toEqual([
      "message.received",
      "message.sent",
      "message.sent",
      "message.sent",
      "message.sent",
      "webhook.test",
    ]);
    for (const a of arrivals)
      expect(
        verify(hook.secret, { "x-service-timestamp": a.timestamp, "x-service-signature": a.signature }, a.body, {
          now: new Date(a.receivedAt),
        }),
      ).toEqual(JSON.parse(a.body));
    const rows = await deliveryRows(stack, { webhook_id: hook.id });
    expect(rows.map((r) => r.trigger).sort()).toEqual(["initial", "initial", "initial", "initial", "replay", "test"]);
    expect(dispatcher.running()).toBe(true);
  }, 180_000);
});

/**
 * What the test sees of the six pieces of work when one is late: the arrivals (ms after the
 * restart), each event's status, the webhook's delivery rows, the work queue (work_items), every
 * job of the deliveries queue with its state, whether the dispatcher still runs, and the end of
 * its log.
 */
async function diagnosis(
  stack: Stack,
  redisServer: RedisServer,
  dispatcher: ServiceProcess,
  hr: HookReceiver,
  webhookId: string,
  eventIds: string[],
  back: number,
): Promise<string> {
  const lines = [`redis-down-accept: late arrival, ${Date.now() - back} ms after the restart`];
  const add = async (label: string, read: () => Promise<unknown>) =>
    lines.push(
      `${label}: ${await read().then(
        (v) => JSON.stringify(v),
        (error: Error) => `(could not read: ${error.message})`,
      )}`,
    );
  await add("arrivals (event, ms after the restart, status)", async () =>
    hr.receiver.arrivals.map((a) => [eventOf(a), a.receivedAt - back, a.status]),
  );
  await add("event statuses", () =>
    Promise.all(eventIds.map((id) => stack.api("GET", `/v1/events/${id}`).then((r) => [id, r.body.status]))),
  );
  await add("delivery rows (event, trigger, attempt, status, error, created)", async () =>
    (await deliveryRows(stack, { webhook_id: webhookId })).map((r) => [
      r.event_id,
      r.trigger,
      r.attempt,
      r.response_status,
      r.error,
      r.created_at,
    ]),
  );
  await add(
    "work queue (kind, work id, attempt, due, lease, leased until, expirations)",
    async () =>
      (
        await stack.pool.query(
          "SELECT kind, work_id, attempt, due_at, lease, leased_until, expirations FROM work_items WHERE queue_prefix = $1 ORDER BY id",
          [stack.prefix],
        )
      ).rows,
  );
  const connection = createRedisConnection(redisServer.url, "producer");
  connection.on("error", () => undefined);
  const queue = new Queue(QUEUE_NAMES.deliveries, { connection, prefix: stack.keyPrefix });
  queue.on("error", () => undefined);
  await add("deliveries queue", () => queue.getJobCounts());
  await add("jobs (id, name, state, attempts started/made, processed, finished, delay, reason)", async () =>
    Promise.all(
      (await queue.getJobs()).map(async (job) => [
        job.id,
        job.name,
        await job.getState(),
        job.attemptsStarted,
        job.attemptsMade,
        job.processedOn,
        job.finishedOn,
        job.delay,
        job.failedReason,
      ]),
    ),
  );
  await queue.close();
  connection.disconnect();
  lines.push(`dispatcher running: ${dispatcher.running()}`, "dispatcher log (end):", dispatcher.output().split("\n").slice(-80).join("\n"));
  return lines.join("\n");
}
