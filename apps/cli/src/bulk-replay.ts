/**
 * Bulk replay the way the specification describes it (there is no bulk-replay operation: list
 * the events and replay each one separately, with the suggested 100 ms pause; docs/api.md,
 * "Bulk replay"): lists the matching events through GET /v1/events, then calls
 * POST /v1/events/{id}/replay once per event, through the typed client (@mailhooks/api-client).
 * A failed replay is reported and the run goes on. A dry run reads each event and the webhooks
 * instead and predicts each call's answer by the API's rules (`predictReplay`).
 */
import { ApiError, createApiClient, dataOf, listAll, type ApiClient, type ListFilter } from "@mailhooks/api-client";

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

/** What became of one event's replay call; a dry run's outcomes are what the call would answer. */
export type Outcome = "replayed" | "expired" | "failed";

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

/** What one replay call would answer: its replays, an expired payload (410), or a refusal (409). */
export type Prediction = { outcome: "replayed"; replays: number } | { outcome: "expired" } | { outcome: "failed"; message: string };

/**
 * The answer POST /v1/events/{id}/replay gives (docs/api.md, "Replay"), from what the API shows:
 * the event's `payload_retained` and destinations, and the account's live webhooks with their
 * status (a deleted webhook is not among them). In the API's order: 410 once the payload is gone;
 * 409 when `webhookId` is not a destination, when there is no destination, when a `targetUrl` has
 * several destinations to choose from and no `webhookId`, and, without a `targetUrl`, when no
 * destination's webhook is enabled or paused; else one replay per destination left.
 */
function predictReplay(
  event: { payload_retained: boolean; destinations: { webhook_id: string }[] },
  webhookStatus: ReadonlyMap<string, string>,
  options: Pick<BulkReplayOptions, "targetUrl" | "webhookId">,
): Prediction {
  if (!event.payload_retained) return { outcome: "expired" };
  // Worded as the real call's refusal is reported (409 and the API's message).
  const conflict = (message: string): Prediction => ({
    outcome: "failed",
    message: new ApiError(409, { error: { code: "conflict", message } }).message,
  });
  let destinations = event.destinations;
  if (options.webhookId !== undefined) {
    destinations = destinations.filter((d) => d.webhook_id === options.webhookId);
    if (destinations.length === 0) return conflict(`webhook ${options.webhookId} is not a destination of this event`);
  }
  if (destinations.length === 0) return conflict("the event has no destination to replay to");
  if (options.targetUrl !== undefined && destinations.length > 1)
    return conflict("the event has several destinations: name the one whose secret signs the replay with webhook_id");
  if (options.targetUrl === undefined) {
    // A paused webhook's replay is made too: it waits for the resume.
    destinations = destinations.filter((d) => ["enabled", "paused"].includes(webhookStatus.get(d.webhook_id) ?? ""));
    if (destinations.length === 0) return conflict("the event's webhooks are disabled: enable one, or replay to a target_url");
  }
  return { outcome: "replayed", replays: destinations.length };
}

/**
 * A dry run: reads the account's webhooks once and each matching event, and reports what each
 * replay call would answer, replaying nothing.
 */
async function predictAll(
  api: ApiClient,
  ids: string[],
  options: BulkReplayOptions,
  reporter: BulkReplayReporter,
): Promise<BulkReplaySummary> {
  const summary: BulkReplaySummary = { matched: ids.length, replayed: 0, skippedExpired: 0, failed: 0 };
  const webhooks = new Map((await listAll(api, "/v1/webhooks")).map((w) => [w.id, w.status]));
  reporter.start(ids.length);
  for (const id of ids) {
    try {
      const event = dataOf(await api.GET("/v1/events/{event_id}", { params: { path: { event_id: id } } }));
      const prediction = predictReplay(event, webhooks, options);
      if (prediction.outcome === "replayed") {
        summary.replayed++;
        reporter.item(id, "replayed", `${prediction.replays} replay(s)`);
      } else if (prediction.outcome === "expired") {
        summary.skippedExpired++;
        reporter.item(id, "expired", "payload past retention");
      } else {
        summary.failed++;
        reporter.item(id, "failed", prediction.message);
      }
    } catch (error) {
      summary.failed++;
      reporter.item(id, "failed", (error as Error).message);
    }
  }
  reporter.stop();
  return summary;
}

/** Replays every matching event, one call each, `pauseMs` apart; a dry run predicts each call instead. */
export async function bulkReplay(options: BulkReplayOptions, reporter: BulkReplayReporter): Promise<BulkReplaySummary> {
  const api = createApiClient({ baseUrl: options.apiUrl, apiKey: options.apiKey });
  let ids: string[];
  try {
    ids = await listMatchingEvents(api, options);
  } catch (error) {
    throw error instanceof ApiError ? new Error(`listing events failed: ${error.message}`) : error;
  }
  if (options.dryRun) {
    try {
      return await predictAll(api, ids, options, reporter);
    } catch (error) {
      throw error instanceof ApiError ? new Error(`listing webhooks failed: ${error.message}`) : error;
    }
  }
  const summary: BulkReplaySummary = { matched: ids.length, replayed: 0, skippedExpired: 0, failed: 0 };
  reporter.start(ids.length);
  const body =
    options.targetUrl || options.webhookId
      ? { ...(options.targetUrl ? { target_url: options.targetUrl } : {}), ...(options.webhookId ? { webhook_id: options.webhookId } : {}) }
      : undefined;
  for (const [index, id] of ids.entries()) {
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
