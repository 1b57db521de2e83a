/**
 * Bulk replay the way the spec describes it ("There is no single bulk-replay operation. To
 * replay many events, list them and replay each one separately", with the suggested 100 ms
 * pause): lists the matching events through GET /v1/events, then calls
 * POST /v1/events/{id}/replay once per event. A failed call is reported and the run goes on.
 */

export interface BulkReplayOptions {
  apiUrl: string;
  apiKey: string;
  since: string;
  until: string;
  inbox?: string;
  eventType?: string;
  status?: string;
  targetUrl?: string;
  webhookId?: string;
  /** Pause between two replay calls, in ms. */
  pauseMs: number;
  dryRun: boolean;
}

export type Outcome = "replayed" | "expired" | "failed" | "listed";

export interface BulkReplayReporter {
  start(total: number): void;
  item(eventId: string, outcome: Outcome, detail: string): void;
  stop(): void;
}

export interface BulkReplaySummary {
  matched: number;
  replayed: number;
  skippedExpired: number;
  failed: number;
}

async function call(options: BulkReplayOptions, method: string, path: string, body?: unknown) {
  const response = await fetch(`${options.apiUrl.replace(/\/$/, "")}${path}`, {
    method,
    headers: { authorization: `Bearer ${options.apiKey}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = { error: { message: text.slice(0, 200) } };
  }
  return { status: response.status, body: json };
}

/** Every matching event id, newest first, following next_cursor. @throws Error on a failed list call. */
export async function listMatchingEvents(options: BulkReplayOptions): Promise<string[]> {
  const query = new URLSearchParams({ since: options.since, until: options.until, limit: "100" });
  if (options.inbox) query.set("inbox_id", options.inbox);
  if (options.eventType) query.set("event_type", options.eventType);
  if (options.status) query.set("status", options.status);
  const ids: string[] = [];
  for (;;) {
    const page = await call(options, "GET", `/v1/events?${query}`);
    if (page.status !== 200) throw new Error(`listing events failed: ${page.status} ${page.body?.error?.message ?? ""}`);
    ids.push(...page.body.data.map((e: { event_id: string }) => e.event_id));
    if (!page.body.next_cursor) return ids;
    query.set("cursor", page.body.next_cursor);
  }
}

/** Replays every matching event, one call each, `pauseMs` apart. */
export async function bulkReplay(options: BulkReplayOptions, reporter: BulkReplayReporter): Promise<BulkReplaySummary> {
  const ids = await listMatchingEvents(options);
  const summary: BulkReplaySummary = { matched: ids.length, replayed: 0, skippedExpired: 0, failed: 0 };
  reporter.start(ids.length);
  const body = options.targetUrl || options.webhookId ? { target_url: options.targetUrl, webhook_id: options.webhookId } : undefined;
  for (const [index, id] of ids.entries()) {
    if (options.dryRun) {
      reporter.item(id, "listed", "would be replayed");
      continue;
    }
    if (index > 0 && options.pauseMs > 0) await new Promise((r) => setTimeout(r, options.pauseMs));
    try {
      const res = await call(options, "POST", `/v1/events/${encodeURIComponent(id)}/replay`, body);
      if (res.status === 202) {
        summary.replayed++;
        reporter.item(id, "replayed", `${res.body.replays.length} replay(s)`);
      } else if (res.status === 410) {
        summary.skippedExpired++;
        reporter.item(id, "expired", "payload past retention");
      } else {
        summary.failed++;
        reporter.item(id, "failed", `${res.status} ${res.body?.error?.code ?? ""}: ${res.body?.error?.message ?? ""}`);
      }
    } catch (error) {
      summary.failed++;
      reporter.item(id, "failed", (error as Error).message);
    }
  }
  reporter.stop();
  return summary;
}
