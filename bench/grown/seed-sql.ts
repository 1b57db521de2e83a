/**
 * The SQL that fills the grown database, run by PostgreSQL itself (INSERT ... SELECT
 * generate_series): 100 accounts with two webhooks each (one account holds half of the events),
 * `events` events spread evenly over the last 80 days, each with its payload, two destinations
 * and three delivery rows (destination A delivered at once; destination B failed once, then its
 * retry delivered), and audit entries of replays. Rows are made in time order with ids shaped like
 * the service's (prefix + UUIDv7 hex: the creation time in ms first), so every primary key grows
 * at its right edge as it does in production.
 *
 * Besides, the retention fixture: one UTC day, EVENT_RETENTION_DAYS + 2 days ago, of `expired`
 * events (one destination and one delivery each, one audit entry per 1,000), whose payloads
 * purge.ts writes and then times the purge of; the metadata of those events stays, as the spec
 * says.
 */

export const SEED_ACCOUNTS = 100;
/** The account that holds half of the events: the list queries are EXPLAINed on it. */
export const BIG_ACCOUNT = "acct_seed000";
export const SEED_DAYS = 80;

/** A UUIDv7-shaped hex id (32 digits) for time `ts` and a unique `salt`, as SQL. */
const idAt = (prefix: string, ts: string, salt: string) =>
  `'${prefix}_' || lpad(to_hex((extract(epoch from ${ts}) * 1000)::bigint), 12, '0') || '7' || substr(md5(${salt}), 1, 19)`;

/**
 * Kinds by a hash of g, so that they are independent of the account: sent 30 %, delivered 28 %,
 * opened 20 %, clicked 10 %, received 11.5 %, bounced 0.5 % (a rare kind, as bounces are). 3 %
 * of events failed, inboxes spread by another hash.
 */
const KIND_OF_PERMILLE = `(SELECT CASE WHEN p < 300 THEN 'message.sent' WHEN p < 580 THEN 'message.delivered' WHEN p < 780 THEN 'message.opened'
                                 WHEN p < 880 THEN 'message.clicked' WHEN p < 995 THEN 'message.received' ELSE 'message.bounced' END
                            FROM (SELECT abs(hashint4(g::int)) % 1000 AS p) h)`;

/** Account of row g: even rows go to the big account, odd ones across the other 99. */
const accountOf = (g: string) =>
  `'acct_seed' || lpad((CASE WHEN ${g} % 2 = 0 THEN 0 ELSE 1 + (${g} / 2) % ${SEED_ACCOUNTS - 1} END)::text, 3, '0')`;

export function accountsAndWebhooks(): string {
  return `
    INSERT INTO accounts (id, name, created_at)
    SELECT 'acct_seed' || lpad(a::text, 3, '0'), 'seed-' || lpad(a::text, 3, '0'), now() - interval '100 days'
      FROM generate_series(0, ${SEED_ACCOUNTS - 1}) a;
    INSERT INTO webhooks (id, account_id, url, events, secret, status, created_at, updated_at)
    SELECT 'wh_seed' || lpad(a::text, 3, '0') || w, 'acct_seed' || lpad(a::text, 3, '0'), 'https://hooks.seed.example/' || w,
           ARRAY['message.sent','message.delivered','message.opened','message.clicked','message.received','message.bounced'],
           'seed-not-a-secret', 'enabled', now() - interval '100 days', now() - interval '100 days'
      FROM generate_series(0, ${SEED_ACCOUNTS - 1}) a, (VALUES ('a'), ('b')) AS v(w);`;
}

/**
 * A temporary table of the rows g in [from, to) of a series of `total`: their time (from `start`,
 * a SQL timestamp, evenly over `span`, a SQL interval), account, kind and ids, which every
 * table's insert then reads. `tag` keeps the ids of two series apart.
 */
export function seriesTable(from: number, to: number, total: number, start: string, span: string, tag: string): string {
  return `
    DROP TABLE IF EXISTS seed_rows;
    CREATE TEMP TABLE seed_rows AS
    SELECT g, ts, acct,
           ${idAt("evt", "ts", `'${tag}e' || g`)} AS evt,
           ${idAt("dst", "ts", `'${tag}a' || g`)} AS dst_a,
           ${idAt("dst", "ts", `'${tag}b' || g`)} AS dst_b,
           ${KIND_OF_PERMILLE} AS kind,
           abs(hashint4(g::int + 1)) % 100 < 3 AS failed,
           abs(hashint4(g::int + 2)) % 400 AS inbox
      FROM (SELECT g, ${start} + (g::float8 / ${total}) * (${span}) AS ts, ${accountOf("g")} AS acct
              FROM generate_series(${from}, ${to - 1}) g) s;`;
}

const payloadOf = (r: string) =>
  `'{"event":"' || ${r}.kind || '","timestamp":' || extract(epoch from ${r}.ts)::bigint || ',"data":{"messageId":"<seed-' || ${r}.g || '@seed.example>","threadId":"thr_' || (${r}.g % 50000) || '","inboxId":"inbox_' || ${r}.inbox || '@seed.example","from":"Seed Sender <sender@seed.example>","to":["recipient-' || (${r}.g % 9973) || '@example.com"],"subject":"Your order ' || ${r}.g || ' has shipped","status":"sent"}}'`;

/** Events of seed_rows. */
export function events(): string {
  return `
    INSERT INTO events (id, account_id, event_type, inbox_id, message_id, thread_id, status, pending_destinations, failed_destinations,
                        occurred_at, created_at)
    SELECT r.evt, r.acct, r.kind, 'inbox_' || r.inbox || '@seed.example', '<seed-' || r.g || '@seed.example>', 'thr_' || (r.g % 50000),
           (CASE WHEN r.failed THEN 'failed' ELSE 'delivered' END)::"DeliveryStatus", 0, CASE WHEN r.failed THEN 1 ELSE 0 END,
           r.ts - interval '1 second', r.ts
      FROM seed_rows r;`;
}

/** Payloads of seed_rows in event_payloads (partitioned by day; the partitions must exist). */
export function payloads(): string {
  return `INSERT INTO event_payloads (event_id, created_at, payload) SELECT r.evt, r.ts, ${payloadOf("r")} FROM seed_rows r;`;
}

/**
 * Destinations and deliveries of seed_rows. Two destinations: A delivered at once (one row), B
 * failed once then delivered by its retry (two rows), or failed twice for 3 events in 100. One
 * destination (the retention fixture): A only.
 */
export function destinationsAndDeliveries(two: boolean): string {
  const a = `
    INSERT INTO destinations (id, account_id, event_id, webhook_id, status, created_at, updated_at, queue_prefix)
    SELECT r.dst_a, r.acct, r.evt, 'wh_seed' || substr(r.acct, 10) || 'a', 'delivered', r.ts, r.ts + interval '40 ms', 'seed' FROM seed_rows r;
    INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, duration_ms, created_at)
    SELECT ${idAt("dlv", "r.ts", "'a' || r.dst_a")}, r.acct, r.evt, 'wh_seed' || substr(r.acct, 10) || 'a', r.dst_a,
           'https://hooks.seed.example/a', 'initial', 0, 200, 35, r.ts + interval '40 ms'
      FROM seed_rows r;`;
  if (!two) return a;
  return `${a}
    INSERT INTO destinations (id, account_id, event_id, webhook_id, status, created_at, updated_at, queue_prefix)
    SELECT r.dst_b, r.acct, r.evt, 'wh_seed' || substr(r.acct, 10) || 'b', (CASE WHEN r.failed THEN 'failed' ELSE 'delivered' END)::"DeliveryStatus",
           r.ts, r.ts + interval '10 seconds', 'seed' FROM seed_rows r;
    INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error, duration_ms, created_at)
    SELECT ${idAt("dlv", "r.ts + interval '50 ms'", "'b0' || r.dst_b")}, r.acct, r.evt, 'wh_seed' || substr(r.acct, 10) || 'b', r.dst_b,
           'https://hooks.seed.example/b', 'initial', 0, 503, 'receiver answered 503', 120, r.ts + interval '50 ms'
      FROM seed_rows r;
    INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error, duration_ms, created_at)
    SELECT ${idAt("dlv", "r.ts + interval '10 seconds'", "'b1' || r.dst_b")}, r.acct, r.evt, 'wh_seed' || substr(r.acct, 10) || 'b', r.dst_b,
           'https://hooks.seed.example/b', 'retry', 1, CASE WHEN r.failed THEN 503 ELSE 200 END,
           CASE WHEN r.failed THEN 'receiver answered 503' END, 90, r.ts + interval '10 seconds'
      FROM seed_rows r;`;
}

/** One replay with its audit entry for every `every`-th row of seed_rows (its destination A). */
export function auditEntries(every: number): string {
  return `
    INSERT INTO replays (id, account_id, event_id, webhook_id, destination_id, destination_url, to_own_url, api_key_id, created_at, status, updated_at, queue_prefix)
    SELECT ${idAt("rpl", "r.ts + interval '1 hour'", "'r' || r.g")}, r.acct, r.evt, 'wh_seed' || substr(r.acct, 10) || 'a', r.dst_a,
           'https://hooks.seed.example/a', true, 'key_seed', r.ts + interval '1 hour', 'delivered', r.ts + interval '1 hour', 'seed'
      FROM seed_rows r WHERE r.g % ${every} = 0;
    INSERT INTO audit_entries (id, account_id, event_id, replay_id, webhook_id, replayed_at, destination_url, response_status, api_key_id, created_at)
    SELECT ${idAt("aud", "r.ts + interval '1 hour'", "'u' || r.g")}, r.acct, r.evt, ${idAt("rpl", "r.ts + interval '1 hour'", "'r' || r.g")},
           'wh_seed' || substr(r.acct, 10) || 'a', r.ts + interval '1 hour', 'https://hooks.seed.example/a', 200, 'key_seed', r.ts + interval '1 hour'
      FROM seed_rows r WHERE r.g % ${every} = 0;`;
}
