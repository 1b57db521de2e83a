import pg from "pg";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.js";

/**
 * PostgreSQL access of a process: one node-postgres pool, used directly by the hot paths
 * (@mailhooks/delivery-state) and by the Prisma client (`@prisma/adapter-pg`, no native engine)
 * for everything else, so that a process never holds more than `poolSize` connections.
 */
export interface Database {
  pool: pg.Pool;
  prisma: PrismaClient;
  /** Ends the Prisma client and the pool. */
  close: () => Promise<void>;
}

/**
 * Options of every pool: a connection attempt gives up after 5 s, and TCP keepalive probes an
 * idle connection from 10 s on, so that a PostgreSQL host that vanished (no FIN, no RST) is
 * noticed once the kernel's probes go unanswered (on Linux 9 probes 75 s apart by default)
 * rather than after the two idle hours of an untuned socket.
 */
const POOL_OPTIONS = { connectionTimeoutMillis: 5_000, keepAlive: true, keepAliveInitialDelayMillis: 10_000 } as const;

/** A node-postgres pool of at most `poolSize` connections (POOL_OPTIONS). */
export function createPool(databaseUrl: string, poolSize = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize, ...POOL_OPTIONS });
  // An idle connection that dies (PostgreSQL restarted) emits 'error' on the pool; without a
  // listener that would crash the process. The next query simply opens a new connection.
  pool.on("error", () => undefined);
  return pool;
}

/** A Prisma client whose queries go through `pool` (it opens no connection of its own). */
export function prismaOnPool(pool: pg.Pool): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg(pool) });
}

/** The pool and a Prisma client on top of it. */
export function createDatabase(databaseUrl: string, poolSize = 10): Database {
  const pool = createPool(databaseUrl, poolSize);
  const prisma = prismaOnPool(pool);
  return {
    pool,
    prisma,
    close: async () => {
      await prisma.$disconnect();
      await pool.end().catch(() => undefined);
    },
  };
}

/**
 * A Prisma client with a pool of its own (`poolSize` connections), for tools that need nothing
 * else (the keys CLI, the demo, tests).
 */
export function createPrismaClient(databaseUrl: string, poolSize = 10): PrismaClient {
  const adapter = new PrismaPg({ connectionString: databaseUrl, max: poolSize, ...POOL_OPTIONS });
  return new PrismaClient({ adapter });
}

export type { PrismaClient };
