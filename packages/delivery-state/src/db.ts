import type pg from "pg";
import type { Sql } from "sql-template-tag";

/** Anything that runs a query: the pool, or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, "query"> | Pick<pg.PoolClient, "query">;

/**
 * Runs one statement built with `sql`. With `name`, the statement is prepared once per
 * connection under that name and its plan can be cached (PostgreSQL switches to a generic plan
 * after five executions): for hot statements whose planning costs more than their execution,
 * such as a join with the day partitions of event_payloads (about 100 in production, planned
 * in some 10 ms each time; executed in about 1 ms with run-time pruning). The name must always
 * come with the same text.
 */
export async function run<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: Queryable,
  query: Sql,
  name?: string,
): Promise<pg.QueryResult<R>> {
  if (name) return db.query<R>({ name, text: query.text, values: query.values });
  return db.query<R>(query.text, query.values);
}

/** SQLSTATEs after which the whole transaction can simply run again: deadlock, serialization. */
const RETRYABLE = new Set(["40P01", "40001"]);

/** Settings of one transaction (`SET LOCAL`), by name: whole numbers (ms for timeouts). */
export type TransactionSettings = Partial<Record<"idle_in_transaction_session_timeout" | "statement_timeout" | "lock_timeout", number>> & {
  /**
   * A transaction-level advisory lock to wait for (pg_advisory_xact_lock, within lock_timeout when
   * set) before `fn` runs, in the BEGIN's round trip; held until the transaction ends. Every
   * statement of `fn` then sees what the lock's previous holder committed.
   */
  advisory_lock?: bigint;
};

/**
 * Runs `fn` in a transaction on one pooled connection: COMMIT when it resolves, ROLLBACK when it
 * throws. A deadlock between two transactions (e.g. two webhooks cancelled at once, sharing
 * events) runs the loser again, up to three times in all. `settings` are set, and the advisory
 * lock taken, with the BEGIN, in the same round trip.
 * @throws whatever `fn` or PostgreSQL threw
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
  settings: TransactionSettings = {},
): Promise<T> {
  // No parameters in a multi-statement query: only whole numbers are written into it.
  const { advisory_lock: lockKey, ...set } = settings;
  const begin = [
    "BEGIN",
    ...Object.entries(set).map(([name, value]) => `SET LOCAL ${name} = ${Math.trunc(Number(value))}`),
    ...(lockKey === undefined ? [] : [`SELECT pg_advisory_xact_lock(${BigInt.asIntN(64, lockKey).toString()})`]),
  ].join("; ");
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken: Error | undefined;
    // A checked-out client has no error listener of the pool's: a connection that dies mid-way
    // (PostgreSQL restarting) would emit an unhandled 'error' and end the process. The query in
    // flight fails anyway; the client is then not given back to the pool.
    const onError = (error: Error) => (broken = error);
    client.on("error", onError);
    try {
      await client.query(begin);
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollback: Error) => (broken = rollback));
      if (attempt < 3 && RETRYABLE.has((error as { code?: string }).code ?? "")) continue;
      throw error;
    } finally {
      client.removeListener("error", onError);
      // A connection that died, or could not even roll back, is not given back to the pool.
      client.release(broken);
    }
  }
}

/** Runs one statement (prepared under `name` when given, see `run`), again after a deadlock (up to three times in all). */
export async function runStatement<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: Queryable,
  query: Sql,
  name?: string,
): Promise<pg.QueryResult<R>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run<R>(db, query, name);
    } catch (error) {
      if (attempt < 3 && RETRYABLE.has((error as { code?: string }).code ?? "")) continue;
      throw error;
    }
  }
}
