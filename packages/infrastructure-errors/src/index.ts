/**
 * The one classifier of infrastructure errors, shared by the API (which answers them 503) and
 * the dispatcher (which postpones a job without using up an attempt, a bounded number of times):
 * true when `error`, or an error in its `cause` chain, means PostgreSQL or Redis could not be
 * reached, was restarting, or did not answer in time (a Redis that hangs is as unusable as one
 * that is down; a PostgreSQL statement or lock timeout). Anything else (a constraint, a bug) is
 * not infrastructure.
 *
 * Errors are told apart by what they carry for machines: a code (Node's, PostgreSQL's SQLSTATE,
 * Prisma's), the kind of Prisma's driver-adapter error, a library's error class. Never by the
 * wording of a message, with one exception kept apart below (UNCODED_MESSAGES).
 */

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

/** ioredis's error classes: a command that used up its retries while Redis was away. */
const ERROR_CLASSES = new Set(["MaxRetriesPerRequestError"]);

/**
 * The exception: errors that node-postgres, pg-pool and ioredis raise as plain `Error`s with no
 * code nor class of their own when a connection is lost, never made or too slow; their message
 * is all there is. Matched whole (from the start), each in its library's exact wording.
 * Removing this needs a mark put where those clients are made (packages/db's pool, packages/
 * queue's connections), e.g. a pg `Client` subclass marking every error that is not a server's
 * answer (`DatabaseError`, which has a SQLSTATE).
 */
const UNCODED_MESSAGES = [
  // node-postgres (pg/lib/client.js): the socket ended, or the connection attempt timed out.
  "Connection terminated",
  "Client has encountered a connection error and is not queryable",
  // pg-pool: no connection within connectionTimeoutMillis.
  "timeout exceeded when trying to connect",
  // ioredis: offline queue disabled and not connected; closed; commandTimeout ran out.
  "Stream isn't writeable and enableOfflineQueue options is false",
  "Connection is closed.",
  "Command timed out",
];

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

function isUncodedLibraryError(e: object): boolean {
  if ((e as { code?: unknown }).code !== undefined) return false;
  const message = (e as { message?: unknown }).message;
  return typeof message === "string" && UNCODED_MESSAGES.some((m) => message.startsWith(m));
}

/** True when `error` or a cause of it (5 deep) means PostgreSQL or Redis is unreachable or too slow (see above). */
export function isInfrastructureError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (carriesCode(e)) return true;
    if (ERROR_CLASSES.has((e as { name?: unknown }).name as string)) return true;
    if (isUncodedLibraryError(e)) return true;
  }
  return false;
}
