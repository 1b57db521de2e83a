import pg from "pg";
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
  return onClient(pool, async (client) => {
    await client.query(beginText(settings));
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  });
}

/** A statement prepared under `name` (the name must always come with the same text). */
export interface NamedStatement {
  name: string;
  query: Sql;
}

/**
 * One transaction in two round trips (the claim's: claim.ts): the BEGIN, with `settings` and the
 * advisory lock, and the statements `first` in one; the statement `second(rows of first's last)`
 * and the COMMIT in the other. So that a statement's values can ride in a multi-statement
 * query (which carries no parameters), each statement is PREPAREd once per connection under its
 * name (its plan cached as any prepared statement's) and EXECUTEd with its values written as
 * literals, converted as node-postgres converts parameters. Deadlocks, ROLLBACK and connections as
 * inTransaction.
 * @returns the rows of first's last statement and of the second
 * @throws whatever `second` or PostgreSQL threw
 */
export async function inTwoRoundTrips<F extends pg.QueryResultRow, S extends pg.QueryResultRow>(
  pool: pg.Pool,
  settings: TransactionSettings,
  first: NamedStatement[],
  second: (rows: F[]) => NamedStatement,
): Promise<{ first: F[]; second: S[] }> {
  return onClient(pool, async (client) => {
    const opened = await client.query([beginText(settings), ...(await executeTexts(client, first))].join("; "));
    const firstRows = lastResult<F>(opened).rows;
    const closed = await client.query([...(await executeTexts(client, [second(firstRows)])), "COMMIT"].join("; "));
    return { first: firstRows, second: results<S>(closed)[0].rows };
  });
}

/** The names PREPAREd on each connection (inTwoRoundTrips). */
const preparedOn = new WeakMap<pg.PoolClient, Set<string>>();

/**
 * `EXECUTE name(literals)` for each statement, PREPAREing on `client` (in a round trip of its own,
 * once per connection) those it does not have yet.
 */
async function executeTexts(client: pg.PoolClient, statements: NamedStatement[]): Promise<string[]> {
  const names = preparedOn.get(client) ?? new Set<string>();
  preparedOn.set(client, names);
  for (const { name, query } of statements) {
    if (names.has(name)) continue;
    await client.query(`PREPARE ${name} AS ${query.text}`).catch((error: { code?: string }) => {
      // Already there (this map lost track of it): it serves as well.
      if (error.code !== "42P05") throw error;
    });
    names.add(name);
  }
  return statements.map(({ name, query }) => `EXECUTE ${name}(${query.values.map(literal).join(", ")})`);
}

/** node-postgres's conversion of a parameter to its text (`pg.utils`, which its types leave out). */
const { prepareValue } = (pg as unknown as { utils: { prepareValue: (value: unknown) => string | Buffer | null } }).utils;

/** `value` as a literal of a multi-statement query: what node-postgres would send as its parameter, quoted. */
function literal(value: unknown): string {
  const text = prepareValue(value);
  if (Buffer.isBuffer(text)) throw new TypeError("a bytea value cannot be written as a literal");
  return text === null ? "NULL" : pg.escapeLiteral(text);
}

const results = <R extends pg.QueryResultRow>(answer: pg.QueryResult<R> | pg.QueryResult<R>[]) =>
  Array.isArray(answer) ? answer : [answer];
const lastResult = <R extends pg.QueryResultRow>(answer: pg.QueryResult<R> | pg.QueryResult<R>[]) => results(answer).at(-1)!;

/** The BEGIN of a transaction with `settings`, in one multi-statement query. */
function beginText(settings: TransactionSettings): string {
  // No parameters in a multi-statement query: only whole numbers are written into it.
  const { advisory_lock: lockKey, ...set } = settings;
  return [
    "BEGIN",
    ...Object.entries(set).map(([name, value]) => `SET LOCAL ${name} = ${Math.trunc(Number(value))}`),
    ...(lockKey === undefined ? [] : [`SELECT pg_advisory_xact_lock(${BigInt.asIntN(64, lockKey).toString()})`]),
  ].join("; ");
}

/**
 * `fn` on one pooled connection, ROLLBACK when it throws; again after a deadlock (up to three
 * times in all). A connection that died, or could not even roll back, is not given back to the
 * pool.
 */
async function onClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken: Error | undefined;
    // A checked-out client has no error listener of the pool's: a connection that dies mid-way
    // (PostgreSQL restarting) would emit an unhandled 'error' and end the process. The query in
    // flight fails anyway; the client is then not given back to the pool.
    const onError = (error: Error) => (broken = error);
    client.on("error", onError);
    try {
      return await fn(client);
    } catch (error) {
      await client.query("ROLLBACK").catch((rollback: Error) => (broken = rollback));
      // A statement DEALLOCATEd behind our back (a pooler's reset): PREPARE it again next time.
      if ((error as { code?: string }).code === "26000") preparedOn.delete(client);
      if (attempt < 3 && RETRYABLE.has((error as { code?: string }).code ?? "")) continue;
      throw error;
    } finally {
      client.removeListener("error", onError);
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
