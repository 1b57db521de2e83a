import { Cluster } from "ioredis";
import { verify } from "@mailhooks/verify";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { apiAs, createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher, waitForOutput } from "./support/processes.js";
import { startThrowawayCluster, type ThrowawayCluster } from "./support/redis-cluster.js";

/**
 * Issue "Fast and flat", past one machine: BullMQ on a real three-primary Redis Cluster
 * (REDIS_CLUSTER=true, REDIS_URL listing its nodes). Queue keys are hash-tagged `{QUEUE_PREFIX}`,
 * so each queue's Lua scripts find their keys in one slot. Events, a batch, a retry (a delayed
 * job) and the maintenance scheduler all go through the cluster, with the API in-process and the
 * dispatcher as a real process started from its own main.
 */
describe("on a Redis Cluster of three primaries", () => {
  let cluster: ThrowawayCluster;
  let stack: Stack;
  beforeAll(async () => {
    cluster = await startThrowawayCluster(3);
    stack = await startStack({
      env: { REDIS_URL: cluster.url, REDIS_CLUSTER: "true", DELIVERY_RETRY_DELAYS_MS: "300,300,300" },
      dispatcher: false,
    });
  });
  afterAll(async () => {
    await killAll();
    await stack?.close();
    await cluster?.destroy();
  });

  test("events, a batch and a retry are delivered, signed, through the cluster", async () => {
    const dispatcher = startDispatcher("dispatcher", {
      REDIS_URL: cluster.url,
      REDIS_CLUSTER: "true",
      QUEUE_PREFIX: stack.prefix,
      DELIVERY_RETRY_DELAYS_MS: "300,300,300",
      LOG_LEVEL: "info",
    });
    await waitForOutput(dispatcher, "dispatcher started");
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect(ready.body.checks).toEqual({ postgres: "ok", redis: "ok" });

    // The first attempt of each event fails: every one goes through a delayed retry job.
    const hr = await startHookReceiver(stack, (a, nth) => (a.event === "webhook.test" || nth > 4 ? {} : { status: 503 }));
    const hook = await createHook(stack, hr, "/cluster", ["message.sent"]);
    const single = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const batch = await stack.api("POST", "/v1/events/batch", {
      events: Array.from({ length: 3 }, () => ({ event_type: "message.sent", data: sampleData("message.sent") })),
    });
    expect([single.status, batch.status]).toEqual([201, 201]);
    const ids = [single.body.event_id, ...batch.body.data.map((e: any) => e.event_id)];
    for (const id of ids)
      await waitUntil(
        () => stack.api("GET", `/v1/events/${id}`),
        (r) => r.body.status === "delivered",
        20_000,
      );

    const arrivals = emailArrivals(hr.receiver.arrivals, "/cluster");
    expect(arrivals).toHaveLength(8);
    for (const a of arrivals)
      expect(
        verify(hook.secret, { "x-service-timestamp": a.timestamp, "x-service-signature": a.signature }, a.body, {
          now: new Date(a.receivedAt),
        }),
      ).toEqual(JSON.parse(a.body));
    const rows = await deliveryRows(stack, { webhook_id: hook.id });
    expect(rows.filter((r) => r.trigger === "retry")).toHaveLength(4);

    // Every key of the deployment is hash-tagged; they live on one node of the three.
    const client = new Cluster(cluster.ports.map((port) => ({ host: "127.0.0.1", port })));
    try {
      await new Promise((resolve) => client.once("ready", resolve));
      const keys: string[] = [];
      for (const node of client.nodes("master")) keys.push(...(await node.keys(`*${stack.prefix}*`)));
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.every((k) => k.startsWith(`{${stack.prefix}}:`))).toBe(true);
      expect(stack.keyPrefix).toBe(`{${stack.prefix}}`);
    } finally {
      client.disconnect();
    }
    expect(dispatcher.running()).toBe(true);
  });

  test("the per-account rate limit and the per-address limiter work on the cluster too", async () => {
    const limited = await startStack({
      env: { REDIS_URL: cluster.url, REDIS_CLUSTER: "true", RATE_LIMIT_PER_MINUTE: "3", UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "2" },
      dispatcher: false,
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await limited.api("GET", "/v1/webhooks")).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const bad = `whk_${"0".repeat(12)}_${"A".repeat(43)}`;
      const unauthenticated: number[] = [];
      for (let i = 0; i < 3; i++) unauthenticated.push((await apiAs(limited, bad, "GET", "/v1/webhooks")).status);
      expect(unauthenticated).toEqual([401, 401, 429]);
    } finally {
      await limited.close();
    }
  });
});
