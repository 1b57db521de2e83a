/**
 * The list queries on the grown database, EXPLAINed as they are sent: the API's own service
 * functions (events by account, inbox, type and status, a deep page, a time window; deliveries by
 * event and by webhook; the audit log) run against a pool whose client records each statement's
 * text and parameters, and each recorded statement is run again under EXPLAIN (ANALYZE, BUFFERS).
 * A line fails when its plan scans events or deliveries (or a partition of them) sequentially,
 * or when one page (51 rows at most) reads more than SLOW_BUFFERS buffers: an index plan that
 * walks a large part of an index to fill a page does not keep "its index plan" in any useful sense.
 */
import pg from "pg";
import { prismaOnPool } from "@mailhooks/db";
import { listEvents } from "../../apps/api/src/services/events.js";
import { listDeliveries } from "../../apps/api/src/services/deliveries.js";
import { listAuditEntries } from "../../apps/api/src/services/audit.js";
import { BIG_ACCOUNT } from "./seed-sql.js";

/** Buffers (8 kB) a page may read before its line fails: 10,000 is 80 MB for at most 51 rows. */
export const SLOW_BUFFERS = 10_000;

export interface ExplainedQuery {
  name: string;
  ok: boolean;
  /** "seq scan" (on events or deliveries), "slow" (over SLOW_BUFFERS), or "ok". */
  verdict: "ok" | "slow" | "seq scan";
  /** The scan nodes of the plans, e.g. "Index Only Scan using events_account_id_status_created_at_id_idx on events". */
  scans: string[];
  executionMs: number;
  sharedBuffers: { hit: number; read: number };
  sql: string[];
}
export interface ExplainReport {
  allIndexed: boolean;
  account: string;
  queries: ExplainedQuery[];
}

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

interface Scan {
  text: string;
  relation?: string;
  index?: string;
  seq: boolean;
}

function scansOf(node: PlanNode, out: Scan[] = []) {
  if (node["Node Type"].includes("Scan")) {
    const text = `${node["Node Type"]}${node["Index Name"] ? ` using ${node["Index Name"]}` : ""}${node["Relation Name"] ? ` on ${node["Relation Name"]}` : ""}`;
    out.push({ text, relation: node["Relation Name"], index: node["Index Name"], seq: node["Node Type"] === "Seq Scan" });
  }
  for (const child of node.Plans ?? []) scansOf(child, out);
  return out;
}
/** A scan of a list table (by its relation, or for a Bitmap Index Scan its index's name). */
const LIST_TABLE = /^(events|deliveries|audit_entries)(_|$)/;
const isListScan = (s: { relation?: string; index?: string }) => LIST_TABLE.test(s.relation ?? s.index ?? "");
/** The scans that fail a line: sequential ones on events or deliveries (or their partitions). */
const isForbidden = (s: { relation?: string; seq: boolean }) => s.seq && /^(events|deliveries)(_|$)/.test(s.relation ?? "");

export async function explainListQueries(databaseUrl: string): Promise<ExplainReport> {
  const recorded: { text: string; values: unknown[] }[] = [];
  class RecordingClient extends pg.Client {
    override query(...args: unknown[]): any {
      const [config, values] = args as [string | { text: string; values?: unknown[] }, unknown[] | undefined];
      if (typeof config === "string") recorded.push({ text: config, values: values ?? [] });
      else if (config && typeof config === "object" && "text" in config)
        recorded.push({ text: config.text, values: config.values ?? (Array.isArray(values) ? values : []) });
      return (super.query as (...a: unknown[]) => unknown)(...args);
    }
  }
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, Client: RecordingClient });
  const prisma = prismaOnPool(pool);
  const deps = { pool, prisma } as never;
  const explainer = new pg.Client({ connectionString: databaseUrl });
  await explainer.connect();

  const one = async <T>(sql: string) => (await explainer.query(sql)).rows[0] as T;
  const account = BIG_ACCOUNT;
  const inbox = (
    await one<{ inbox_id: string }>(`SELECT inbox_id FROM events WHERE account_id = '${account}' ORDER BY created_at DESC LIMIT 1`)
  ).inbox_id;
  const deep = await one<{ id: string; created_at: Date }>(
    `SELECT id, created_at FROM events WHERE account_id = '${account}' AND created_at < now() - interval '40 days' ORDER BY created_at DESC LIMIT 1`,
  );
  const webhook = (await one<{ id: string }>(`SELECT id FROM webhooks WHERE account_id = '${account}' ORDER BY id LIMIT 1`)).id;
  const cursor = { at: deep.created_at, id: deep.id };

  const cases: [string, () => Promise<unknown>][] = [
    ["events: first page", () => listEvents(deps, account, { limit: 50 })],
    ["events: deep page (40 days back)", () => listEvents(deps, account, { limit: 50, cursor })],
    ["events by inbox", () => listEvents(deps, account, { limit: 50, inbox_id: inbox })],
    ["events by inbox, deep page", () => listEvents(deps, account, { limit: 50, inbox_id: inbox, cursor })],
    ["events by type (common: opened, 20 %)", () => listEvents(deps, account, { limit: 50, event_type: "message.opened" })],
    ["events by type (rare: bounced, 0.5 %)", () => listEvents(deps, account, { limit: 50, event_type: "message.bounced" })],
    ["events by status (failed)", () => listEvents(deps, account, { limit: 50, status: "failed" })],
    ["events by status (pending: none)", () => listEvents(deps, account, { limit: 50, status: "pending" })],
    [
      "events in a one-day window",
      () =>
        listEvents(deps, account, {
          limit: 50,
          since: new Date(Date.now() - 5 * 86_400_000),
          until: new Date(Date.now() - 4 * 86_400_000),
        }),
    ],
    ["deliveries by event", () => listDeliveries(deps, account, { limit: 50, event_id: deep.id })],
    ["deliveries by webhook", () => listDeliveries(deps, account, { limit: 50, webhook_id: webhook })],
    ["deliveries, all of the account", () => listDeliveries(deps, account, { limit: 50 })],
    ["audit log", () => listAuditEntries(deps, account, { limit: 50 })],
    ["audit log of an event", () => listAuditEntries(deps, account, { limit: 50, event_id: deep.id })],
  ];
  const queries: ExplainedQuery[] = [];
  for (const [name, call] of cases) {
    recorded.length = 0;
    await call();
    const statements = recorded.filter((r) => /^\s*(SELECT|WITH)/i.test(r.text));
    const scans: Scan[] = [];
    let executionMs = 0;
    const sharedBuffers = { hit: 0, read: 0 };
    for (const s of statements) {
      const { rows } = await explainer.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${s.text}`, s.values);
      const plan = rows[0]["QUERY PLAN"][0] as {
        Plan: PlanNode & { "Shared Hit Blocks"?: number; "Shared Read Blocks"?: number };
        "Execution Time": number;
      };
      scansOf(plan.Plan, scans);
      executionMs += plan["Execution Time"];
      sharedBuffers.hit += plan.Plan["Shared Hit Blocks"] ?? 0;
      sharedBuffers.read += plan.Plan["Shared Read Blocks"] ?? 0;
    }
    const verdict = scans.some(isForbidden) ? "seq scan" : sharedBuffers.hit + sharedBuffers.read > SLOW_BUFFERS ? "slow" : "ok";
    queries.push({
      name,
      ok: verdict === "ok",
      verdict,
      scans: scans.filter(isListScan).map((s) => s.text),
      executionMs,
      sharedBuffers,
      sql: statements.map((s) => s.text),
    });
  }
  await explainer.end();
  await prisma.$disconnect();
  await pool.end();
  return { allIndexed: queries.every((q) => q.ok), account, queries };
}
