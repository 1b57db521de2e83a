import pg from "pg";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.js";
import { ErrorMarkingPool } from "./error-marking.js";

/**
 * PostgreSQL access of a process: one node-postgres pool, used directly by the hot paths
 * (@mailhooks/delivery-state) and by the Prisma client (`@prisma/adapter-pg`, no native engine)
 * for everything else: `poolSize` connections at most for all of its queries. Beside them a
 * process may hold connections for a purpose of its own (a dispatcher's attempt loads, a LISTEN
 * connection), counted in docs/configuration.md (DATABASE_POOL_SIZE).
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

/**
 * The statement timeout of every pooled connection by default, in ms (DATABASE_STATEMENT_TIMEOUT_MS).
 * No statement of the service needs more; without one, a statement stuck behind a lock (a DDL
 * queued behind a long reader) held its connection for as long as that lasted, the pool filled
 * up and the API stopped answering. A transaction may set its own (`SET LOCAL`, as the outbox
 * relay does).
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;

export interface PoolSettings {
  /** PostgreSQL's statement_timeout of each connection, in ms; 0 leaves the server's (none by default). */
  statementTimeoutMs?: number;
  /**
   * Every statement prepared under a name keeps its one generic plan (plan_cache_mode =
   * force_generic_plan), never one made for the values of a call: for a pool of reads whose
   * generic plan is as good as any, and that PostgreSQL would otherwise plan again, now and then,
   * at a cost above their execution's (the dispatcher's loads: loadDestinations).
   */
  genericPlans?: boolean;
}

/** node-postgres options of a pool of at most `poolSize` connections (POOL_OPTIONS and the statement timeout). */
function poolConfig(databaseUrl: string, poolSize: number, settings: PoolSettings): pg.PoolConfig {
  const statementTimeoutMs = settings.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  // Sent as startup parameters of each connection: no extra round trip, and they survive a reconnect.
  return {
    connectionString: databaseUrl,
    max: poolSize,
    ...POOL_OPTIONS,
    ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
    ...(settings.genericPlans ? { options: "-c plan_cache_mode=force_generic_plan" } : {}),
  };
}

/**
 * A node-postgres pool of at most `poolSize` connections (POOL_OPTIONS, statement timeout of
 * `settings`). The errors it and its clients raise about a connection (lost, never made, none
 * free in time) are marked for isInfrastructureError (error-marking.ts).
 */
export function createPool(databaseUrl: string, poolSize = 10, settings: PoolSettings = {}): pg.Pool {
  const pool = new ErrorMarkingPool(poolConfig(databaseUrl, poolSize, settings));
  // An idle connection that dies (PostgreSQL restarted) emits 'error' on the pool; without a
  // listener that would crash the process. The next query simply opens a new connection.
  pool.on("error", () => undefined);
  return pool;
}

/** A Prisma client whose queries go through `pool` (it opens no connection of its own). */
export function prismaOnPool(pool: pg.Pool): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg(pool) });
}

/** What a service's configuration (@mailhooks/config) says of its database. */
export interface DatabaseConfig {
  DATABASE_URL: string;
  DATABASE_POOL_SIZE: number;
  /** statement_timeout of each connection, in ms (0: the server's). */
  DATABASE_STATEMENT_TIMEOUT_MS: number;
}

/** createDatabase as a service's configuration names it: its URL, pool size and statement timeout. */
export function createConfiguredDatabase(config: DatabaseConfig): Database {
  return createDatabase(config.DATABASE_URL, config.DATABASE_POOL_SIZE, { statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS });
}

/** The pool and a Prisma client on top of it. */
export function createDatabase(databaseUrl: string, poolSize = 10, settings: PoolSettings = {}): Database {
  const pool = createPool(databaseUrl, poolSize, settings);
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
 * A Prisma client with a pool of its own (`poolSize` connections, createPool's), for tools that
 * need nothing else (the keys CLI, the demo, tests). `$disconnect` ends the pool.
 */
export function createPrismaClient(databaseUrl: string, poolSize = 10, settings: PoolSettings = {}): PrismaClient {
  const adapter = new PrismaPg(createPool(databaseUrl, poolSize, settings), { disposeExternalPool: true });
  return new PrismaClient({ adapter });
}

export type { PrismaClient };
