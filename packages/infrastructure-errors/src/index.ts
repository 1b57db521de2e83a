/**
 * The one classifier of infrastructure errors, shared by the API (which answers them 503) and
 * the dispatcher (which postpones a job without using up an attempt, a bounded number of times):
 * true when `error`, or an error in its `cause` chain, means PostgreSQL or Redis could not be
 * reached, was restarting, or did not answer in time (ioredis's "Command timed out": a Redis that
 * hangs is as unusable as one that is down; a PostgreSQL statement or lock timeout). Anything else
 * (a constraint, a bug) is not infrastructure.
 */

const CODES = new Set([
  // Node's network errors.
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  // Prisma: server unreachable, timed out, closed the connection, pool timeout.
  "P1001",
  "P1002",
  "P1008",
  "P1017",
  "P2024",
  // PostgreSQL SQLSTATEs: admin shutdown, crash shutdown, cannot connect now, connection failures.
  "57P01",
  "57P02",
  "57P03",
  "08000",
  "08001",
  "08003",
  "08004",
  "08006",
  // A statement_timeout or lock_timeout ran out (the pools' statement timeout; DDL behind a long
  // reader): PostgreSQL is there but busy, so the request may simply be tried again.
  "57014",
  "55P03",
]);

const MESSAGES =
  /ECONNREFUSED|Connection terminated|Can't reach database|connection timeout|timeout exceeded when trying to connect|enableOfflineQueue|Connection is closed|MaxRetriesPerRequest|Reached the max retries|Stream isn't writeable|the database system is (starting|shutting) up|terminating connection|Server has closed the connection|ConnectionClosed|Client has encountered a connection error|Connection ended unexpectedly|canceling statement due to (statement|lock) timeout|Command timed out/i;

export function isInfrastructureError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CODES.has(code)) return true;
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && MESSAGES.test(message)) return true;
  }
  return false;
}
