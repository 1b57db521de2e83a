import { createHook, startHookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * Issue 17 item 9, one clock: every delivery row's `created_at` and every audit entry's
 * `replayed_at` is PostgreSQL's now() when the row is written (not when its attempt started, up
 * to DELIVERY_TIMEOUT_MS before), so a row becomes visible within the time its write takes. A
 * client that polls the logs the way docs/api.md, "Polling the logs", advises (each time from the newest time it has
 * seen minus an overlap window, dropping the ids it already has) misses no row, even while many
 * concurrent replays, whose receiver answers after 0 to 2.5 s in no particular order, write them.
 * The overlap used here (1 s) is much shorter than the page's (10 s) and than the attempts.
 */
const OVERLAP_MS = 1_000;
const REPLAYS = 60;

interface Row {
  id: string;
  at: string;
}

/** A poller of one log, as docs/api.md describes it. */
function poller(acct: Account, read: (acct: Account, sinceMs: number | null) => Promise<Row[]>) {
  const seen = new Set<string>();
  let newest: number | null = null;
  return {
    seen,
    poll: async () => {
      const rows = await read(acct, newest === null ? null : newest - OVERLAP_MS);
      for (const row of rows) {
        seen.add(row.id);
        newest = Math.max(newest ?? 0, Date.parse(row.at));
      }
    },
  };
}

/** GET /v1/audit-log?since=..., every page. */
async function auditSince(acct: Account, sinceMs: number | null): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams({
      limit: "100",
      ...(sinceMs !== null ? { since: new Date(sinceMs).toISOString() } : {}),
      ...(cursor ? { cursor } : {}),
    });
    const res = await acct.api("GET", `/v1/audit-log?${params}`);
    expect(res.status).toBe(200);
    rows.push(...res.body.data.map((e: { id: string; replayed_at: string }) => ({ id: e.id, at: e.replayed_at })));
    cursor = res.body.next_cursor;
  } while (cursor);
  return rows;
}

/** GET /v1/deliveries, newest first, page after page until the rows are older than `sinceMs`. */
async function deliveriesSince(acct: Account, sinceMs: number | null): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams({ limit: "100", ...(cursor ? { cursor } : {}) });
    const res = await acct.api("GET", `/v1/deliveries?${params}`);
    expect(res.status).toBe(200);
    const page = (res.body.data as { id: string; created_at: string }[]).map((d) => ({ id: d.id, at: d.created_at }));
    rows.push(...page.filter((r) => sinceMs === null || Date.parse(r.at) >= sinceMs));
    if (sinceMs !== null && page.some((r) => Date.parse(r.at) < sinceMs)) break;
    cursor = res.body.next_cursor;
  } while (cursor);
  return rows;
}

describe("polling the logs while rows are written", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack?.close());

  test(`an overlap window and de-duplication by id miss no row of ${REPLAYS} concurrent replays in /v1/audit-log?since= and /v1/deliveries`, async () => {
    const acct = await stack.newAccount();
    // Replays are answered after 0 to 2.5 s, so attempts that start first often end last.
    const hr = await startHookReceiver(stack, (_a, nth) => (nth <= 10 ? {} : { delayMs: ((nth * 7919) % 26) * 100 }));
    await createHook(acct, hr, "/poll", ["message.sent"]);
    const eventIds: string[] = [];
    for (let i = 0; i < 10; i++)
      eventIds.push((await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") })).body.event_id);
    await Promise.all(
      eventIds.map((id) =>
        waitUntil(
          () => acct.api("GET", `/v1/events/${id}`),
          (r) => r.body.status === "delivered",
        ),
      ),
    );

    const audit = poller(acct, auditSince);
    const deliveries = poller(acct, deliveriesSince);
    let writing = true;
    const polling = (async () => {
      while (writing) {
        await Promise.all([audit.poll(), deliveries.poll()]);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const replays = await Promise.all(
      Array.from({ length: REPLAYS }, (_, i) => acct.api("POST", `/v1/events/${eventIds[i % eventIds.length]}/replay`)),
    );
    expect(replays.map((r) => r.status)).toEqual(replays.map(() => 202));
    await waitUntil(
      () => auditSince(acct, null),
      (rows) => rows.length === REPLAYS,
      60_000,
      200,
    );
    await waitUntil(
      () => deliveriesSince(acct, null),
      (rows) => rows.length >= REPLAYS + eventIds.length + 1,
      20_000,
      200,
    );
    writing = false;
    await polling;
    // One more poll, as the client's next one would be.
    await Promise.all([audit.poll(), deliveries.poll()]);

    const allAudit = (await auditSince(acct, null)).map((r) => r.id);
    const allDeliveries = (await deliveriesSince(acct, null)).map((r) => r.id);
    expect(allAudit).toHaveLength(REPLAYS);
    expect(allAudit.filter((id) => !audit.seen.has(id))).toEqual([]);
    expect(allDeliveries.filter((id) => !deliveries.seen.has(id))).toEqual([]);
  }, 120_000);
});
