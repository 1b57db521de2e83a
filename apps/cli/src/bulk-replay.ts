/**
 * Bulk replay the way the spec describes it ("There is no single bulk-replay operation. To
 * replay many events, list them and replay each one separately", with the suggested 100 ms
 * pause): lists the matching events through GET /v1/events, then calls
 * POST /v1/events/{id}/replay once per event, through the typed client (@mailhooks/api-client).
 * A failed replay is reported and the run goes on.
 */
import { ApiError, createApiClient, listAll, type ApiClient, type ListFilter } from "@mailhooks/api-client";

export interface BulkReplayOptions {
  apiUrl: string;
  apiKey: string;
  since: string;
  until: string;
  inbox?: string;
  eventType?: ListFilter<"/v1/events">["event_type"];
  status?: ListFilter<"/v1/events">["status"];
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

/** Every matching event id, newest first, following next_cursor. @throws ApiError on a failed list call. */
export async function listMatchingEvents(api: ApiClient, options: BulkReplayOptions): Promise<string[]> {
  const events = await listAll(api, "/v1/events", {
    since: options.since,
    until: options.until,
    ...(options.inbox ? { inbox_id: options.inbox } : {}),
    ...(options.eventType ? { event_type: options.eventType } : {}),
    ...(options.status ? { status: options.status } : {}),
  });
  return events.map((e) => e.event_id);
}

/** Replays every matching event, one call each, `pauseMs` apart. */
export async function bulkReplay(options: BulkReplayOptions, reporter: BulkReplayReporter): Promise<BulkReplaySummary> {
  const api = createApiClient({ baseUrl: options.apiUrl, apiKey: options.apiKey });
  let ids: string[];
  try {
    ids = await listMatchingEvents(api, options);
  } catch (error) {
    throw error instanceof ApiError ? new Error(`listing events failed: ${error.message}`) : error;
  }
  const summary: BulkReplaySummary = { matched: ids.length, replayed: 0, skippedExpired: 0, failed: 0 };
  reporter.start(ids.length);
  const body =
    options.targetUrl || options.webhookId
      ? { ...(options.targetUrl ? { target_url: options.targetUrl } : {}), ...(options.webhookId ? { webhook_id: options.webhookId } : {}) }
      : undefined;
  for (const [index, id] of ids.entries()) {
    if (options.dryRun) {
      reporter.item(id, "listed", "would be replayed");
      continue;
    }
    if (index > 0 && options.pauseMs > 0) await new Promise((r) => setTimeout(r, options.pauseMs));
    try {
      const { data, error, response } = await api.POST("/v1/events/{event_id}/replay", {
        params: { path: { event_id: id } },
        ...(body ? { body } : {}),
      });
      if (data) {
        summary.replayed++;
        reporter.item(id, "replayed", `${data.replays.length} replay(s)`);
      } else if (response.status === 410) {
        summary.skippedExpired++;
        reporter.item(id, "expired", "payload past retention");
      } else {
        summary.failed++;
        reporter.item(id, "failed", new ApiError(response.status, error).message);
      }
    } catch (error) {
      summary.failed++;
      reporter.item(id, "failed", (error as Error).message);
    }
  }
  reporter.stop();
  return summary;
}
