import net from "node:net";
import type { Redis } from "ioredis";
import { createDatabase, createPool, type Database } from "@mailhooks/db";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { createRedisConnection, type RedisClient } from "@mailhooks/queue";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import { databaseUrlVia } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";

/**
 * Issue 19, item 3 ("no behaviour keys on an error message's text, a library's"): node-postgres,
 * pg-pool and ioredis raise a lost, refused or too slow connection as plain errors with no code.
 * The clients @mailhooks/db and @mailhooks/queue make mark those where they are raised, so that
 * isInfrastructureError (a 503; an attempt's record written again, or its lease left to lapse)
 * knows them by the mark; their message stays as the library wrote it. The servers' own answers,
 * and JavaScript's errors, are not marked.
 * Real clients against the real servers, through a TCP proxy that loses, freezes or refuses.
 */
const rejection = async (promise: Promise<unknown>): Promise<Error> => {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
};

/** A loopback port nobody listens on. */
const closedPort = async (): Promise<number> => {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
};

describe("PostgreSQL: connection errors of @mailhooks/db's pool are marked", () => {
  let proxy: TcpProxy;
  let db: Database;

  beforeAll(async () => {
    const target = new URL(testDatabaseUrl());
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    db = createDatabase(databaseUrlVia(proxy.port), 1);
  });
  afterAll(async () => {
    proxy?.thaw();
    await db?.close();
    await proxy?.close();
  });

  test("a connection lost mid-statement, then a client left unqueryable", async () => {
    const lost = proxy.loseReplyTo("lost_by_pool_query");
    const viaPool = await rejection(db.pool.query("SELECT 'lost_by_pool_query'"));
    await lost;
    expect(viaPool.message).toBe("Connection terminated unexpectedly");
    expect(isInfrastructureError(viaPool)).toBe(true);

    const client = await db.pool.connect();
    client.on("error", () => undefined);
    try {
      const lostAgain = proxy.loseReplyTo("lost_by_client_query");
      const viaClient = await rejection(client.query("SELECT 'lost_by_client_query'"));
      await lostAgain;
      expect(isInfrastructureError(viaClient)).toBe(true);
      const unqueryable = await rejection(client.query("SELECT 1"));
      expect(unqueryable.message).toMatch(/not queryable/);
      expect(isInfrastructureError(unqueryable)).toBe(true);
    } finally {
      client.release(true);
    }

    const lostByCallback = proxy.loseReplyTo("lost_by_callback");
    const viaCallback = new Promise<unknown>((resolve, reject) =>
      db.pool.query("SELECT 'lost_by_callback'", (error) => (error ? reject(error) : resolve(null))),
    );
    expect(isInfrastructureError(await rejection(viaCallback))).toBe(true);
    await lostByCallback;
    expect((await db.pool.query("SELECT 1 AS one")).rows[0].one).toBe(1);
  });

  test("no connection made in time (frozen), and none free in time (pg-pool), through Prisma too", async () => {
    // A pool of one whose connection is taken: pg-pool gives up after connectionTimeoutMillis (5 s).
    const full = createPool(testDatabaseUrl(), 1);
    const taken = await full.connect();
    // No connection yet: each is to be made through the frozen proxy, and gives up after 5 s too.
    const frozen = createDatabase(databaseUrlVia(proxy.port), 2);
    proxy.freeze();
    try {
      const [poolFull, viaPrisma, neverConnected] = await Promise.all([
        rejection(full.query("SELECT 1")),
        rejection(frozen.prisma.account.findFirst()),
        rejection(frozen.pool.query("SELECT 1")),
      ]);
      expect(poolFull.message).toBe("timeout exceeded when trying to connect");
      expect(neverConnected.message).toBe("Connection terminated due to connection timeout");
      for (const error of [poolFull, viaPrisma, neverConnected]) expect(isInfrastructureError(error)).toBe(true);
    } finally {
      proxy.thaw();
      taken.release();
      await full.end();
      await frozen.close();
    }
  });

  test("PostgreSQL's answers and JavaScript's errors are not", async () => {
    const answer = await rejection(db.pool.query("SELECT 1 / 0"));
    expect(answer).toMatchObject({ code: "22012" });
    const throughPrisma = await rejection(db.prisma.$queryRawUnsafe("SELECT 1 / 0"));
    const unserializable = await rejection(db.pool.query("SELECT $1::text", [{ n: 1n }]));
    expect(unserializable).toBeInstanceOf(TypeError);
    for (const error of [answer, throughPrisma, unserializable]) expect(isInfrastructureError(error)).toBe(false);
  });
});

describe("Redis: connection errors of @mailhooks/queue's connections are marked", () => {
  const clients: RedisClient[] = [];
  const connect = (...args: Parameters<typeof createRedisConnection>) => {
    const client = createRedisConnection(...args);
    client.on("error", () => undefined);
    clients.push(client);
    return client;
  };
  let proxy: TcpProxy;

  beforeAll(async () => {
    const target = new URL(testRedisUrl());
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
  });
  afterAll(async () => {
    proxy?.thaw();
    for (const client of clients) client.disconnect();
    await proxy?.close();
  });

  test("a producer while Redis is away, one server or a cluster", async () => {
    const port = await closedPort();
    const away = await rejection(connect(`redis://127.0.0.1:${port}`, "producer").get("x"));
    expect(away.message).toBe("Stream isn't writeable and enableOfflineQueue options is false");
    const clusterAway = await rejection(connect(`redis://127.0.0.1:${port}`, "producer", { cluster: true }).get("x"));
    for (const error of [away, clusterAway]) expect(isInfrastructureError(error)).toBe(true);
  });

  test("a frozen Redis (the command timeout), then a closed connection", async () => {
    const producer = connect(`redis://127.0.0.1:${proxy.port}`, "producer", { commandTimeoutMs: 200 });
    await new Promise((resolve) => producer.once("ready", resolve));
    proxy.freeze();
    try {
      const timedOut = await rejection(producer.get("x"));
      expect(timedOut.message).toBe("Command timed out");
      expect(isInfrastructureError(timedOut)).toBe(true);
    } finally {
      proxy.thaw();
    }
    producer.disconnect();
    expect(isInfrastructureError(await rejection(producer.get("x")))).toBe(true);
  });

  test("Redis's answers are not", async () => {
    const producer = connect(testRedisUrl(), "producer");
    await new Promise((resolve) => producer.once("ready", resolve));
    const unknown = await rejection((producer as Redis).call("NO_SUCH_COMMAND"));
    const script = await rejection((producer as Redis).eval("return redis.error_reply('refused')", 0));
    for (const error of [unknown, script]) expect(isInfrastructureError(error)).toBe(false);
  });
});
