import pg from "pg";
import { markInfrastructureError } from "@mailhooks/infrastructure-errors";

/**
 * Marks (@mailhooks/infrastructure-errors) the errors node-postgres and pg-pool raise about a
 * connection rather than as PostgreSQL's answer, so that isInfrastructureError knows them without
 * reading their text: "Connection terminated unexpectedly", "Connection terminated due to
 * connection timeout", "timeout exceeded when trying to connect" (pg-pool: no connection free in
 * time), "Client has encountered a connection error and is not queryable" are plain `Error`s
 * with no code. PostgreSQL's own answers are `DatabaseError`s with a SQLSTATE: the classifier
 * reads those by their code. JavaScript's own errors (a value that cannot be serialized, a wrong
 * argument: TypeError, RangeError...) are bugs, not outages. pg's few checks of its arguments
 * that raise a plain `Error` (a prepared statement's name reused for another text, values that
 * are not an array) are marked too: nothing tells them apart but their text, and every test
 * running the statement meets them.
 *
 * The error is the same object: its message, class and stack are unchanged for logs.
 */
export function markClientError<T>(error: T): T {
  if (error instanceof pg.DatabaseError || PROGRAMMING_ERRORS.some((type) => error instanceof type)) return error;
  return markInfrastructureError(error);
}

const PROGRAMMING_ERRORS = [TypeError, RangeError, ReferenceError, SyntaxError];

type Callback = (error: unknown, ...rest: unknown[]) => void;

/**
 * Calls `call` with `args`, marking the error it reports: to the callback among `args` (the last
 * function from index `from` on), or else by rejecting the promise it returns.
 */
function reportingMarked(args: unknown[], from: number, call: (args: unknown[]) => unknown): unknown {
  for (let at = args.length - 1; at >= from; at--) {
    const callback = args[at];
    if (typeof callback !== "function") continue;
    const marked = [...args];
    marked[at] = (error: unknown, ...rest: unknown[]) => (callback as Callback)(markClientError(error), ...rest);
    return call(marked);
  }
  const result = call(args);
  // A query object of its own (a cursor) reports through its events: left as it is.
  if (typeof (result as PromiseLike<unknown> | undefined)?.then !== "function") return result;
  return (result as PromiseLike<unknown>).then(undefined, (error: unknown) => {
    throw markClientError(error);
  });
}

/**
 * A node-postgres client whose queries report marked errors (markClientError), promise or
 * callback alike: the clients of ErrorMarkingPool, used directly by transactions.
 */
export class ErrorMarkingClient extends pg.Client {
  // One signature for pg's many overloads: the arguments go through unchanged.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Reflect.apply gives it this explicitly
    return reportingMarked(args, 1, (marked) => Reflect.apply(super.query, this, marked));
  }
}

/**
 * A node-postgres pool of ErrorMarkingClients whose own `connect` and `query` report marked
 * errors too: pg-pool's connection timeout, a connection that could not be made, and an error a
 * client emits while pool.query waits on it (which pg-pool hands over directly).
 */
export class ErrorMarkingPool extends pg.Pool {
  constructor(config: pg.PoolConfig) {
    super({ ...config, Client: ErrorMarkingClient });
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override connect(...args: any[]): any {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Reflect.apply gives it this explicitly
    return reportingMarked(args, 0, (marked) => Reflect.apply(super.connect, this, marked));
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Reflect.apply gives it this explicitly
    return reportingMarked(args, 1, (marked) => Reflect.apply(super.query, this, marked));
  }
}
