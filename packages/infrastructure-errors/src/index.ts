/**
 * The one classifier of infrastructure errors, shared by the API (which answers them 503) and
 * the dispatcher (which postpones a job without using up an attempt, a bounded number of times):
 * true when `error`, or an error in its `cause` chain, means PostgreSQL or Redis could not be
 * reached, was restarting, or did not answer in time (a Redis that hangs is as unusable as one
 * that is down; a PostgreSQL statement or lock timeout). Anything else (a constraint, a bug) is
 * not infrastructure.
 *
 * Errors are told apart by what they carry for machines: a code (Node's, PostgreSQL's SQLSTATE,
 * Prisma's), the kind of Prisma's driver-adapter error, a library's error class, or the mark
 * below. Never by the wording of a message.
 */

/**
 * The mark of an error that a PostgreSQL or Redis client raised about its connection rather than
 * as the server's answer. node-postgres, pg-pool and ioredis raise those as plain `Error`s with
 * no code nor class of their own (a connection lost, never made, or too slow), so the clients the
 * service makes mark them where they are made (@mailhooks/db's pool, @mailhooks/queue's Redis
 * connections). `Symbol.for`: one mark even if two copies of this package are loaded.
 */
const INFRASTRUCTURE = Symbol.for("@mailhooks/infrastructure-errors.infrastructure");

/**
 * Marks `error` (an object; anything else is returned as it is) as an infrastructure error and
 * returns it: the same object, its message and class unchanged for logs and for the library's own
 * checks. The mark is a non-enumerable property: JSON, logs and `util.inspect` do not show it.
 */
export function markInfrastructureError<T>(error: T): T {
  if (error && typeof error === "object" && !Object.hasOwn(error, INFRASTRUCTURE)) {
    try {
      Object.defineProperty(error, INFRASTRUCTURE, { value: true });
    } catch {
      // A frozen object: nothing a client of ours raises; it is then simply not marked.
    }
  }
  return error;
}

/** Node's network errors. */
const NETWORK_CODES = ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH"];

/** Prisma: server unreachable, timed out, closed the connection, pool timeout. */
const PRISMA_CODES = ["P1001", "P1002", "P1008", "P1017", "P2024"];

/**
 * PostgreSQL SQLSTATEs: admin shutdown, crash shutdown, cannot connect now (starting up or shutting
 * down), connection failures; and a statement_timeout or lock_timeout that ran out (the pools'
 * statement timeout; DDL behind a long reader): PostgreSQL is there but busy, so the request may
 * simply be tried again.
 */
const SQLSTATES = ["57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006", "57014", "55P03"];

const CODES = new Set([...NETWORK_CODES, ...PRISMA_CODES, ...SQLSTATES]);

/**
 * Kinds of Prisma's driver-adapter errors (`meta.driverAdapterError.cause.kind`, @prisma/adapter-pg)
 * that mean the server could not be reached or went away. A raw query answers them with Prisma's
 * generic P2010, so the kind is what tells them apart.
 */
const ADAPTER_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout"]);

/**
 * Libraries' error classes, by name: ioredis's command that used up its retries while Redis was
 * away; BullMQ's connection closed (waiting for a connection that ended).
 */
const ERROR_CLASSES = new Set(["MaxRetriesPerRequestError", "ConnectionClosedError"]);

/** What @prisma/adapter-pg puts in a Prisma error's `meta.driverAdapterError.cause`. */
interface AdapterCause {
  kind?: unknown;
  code?: unknown;
  originalCode?: unknown;
}

function carriesCode(e: object): boolean {
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string" && CODES.has(code)) return true;
  const adapter = (e as { meta?: { driverAdapterError?: { cause?: AdapterCause } } }).meta?.driverAdapterError?.cause;
  if (!adapter) return false;
  if (typeof adapter.kind === "string" && ADAPTER_KINDS.has(adapter.kind)) return true;
  return [adapter.code, adapter.originalCode].some((c) => typeof c === "string" && CODES.has(c));
}

/**
 * True when `error` or a cause of it (5 deep) carries a code, a class or the mark
 * (markInfrastructureError) meaning PostgreSQL or Redis is unreachable or too slow (see above).
 */
export function isInfrastructureError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (carriesCode(e)) return true;
    if (ERROR_CLASSES.has((e as { name?: unknown }).name as string)) return true;
    if ((e as { [INFRASTRUCTURE]?: unknown })[INFRASTRUCTURE] === true) return true;
  }
  return false;
}
