import { Router, type Request } from "express";
import type { ApiDeps } from "../../deps.js";
import { isAppError } from "../../errors.js";
import { paginationShape, type Page } from "../../http/pagination.js";
import { parseOrThrow } from "../../http/validate.js";
import { listQuery } from "../../routes/events.js";
import { resourceId } from "../../routes/webhooks.js";
import { listEvents, type EventFilter, type EventListItem } from "../../services/events.js";
import { replayRequestSchema, requestReplay } from "../../services/replays.js";
import { findWebhook, listWebhooks, toWebhookView, type WebhookView } from "../../services/webhooks.js";
import { byField, field, filterFields, filterQuery, rawField, tryParse } from "../forms.js";
import { render } from "../render.js";
import { refusalInWords } from "../refusal-words.js";
import { dashboardPrincipal } from "../session.js";
import { EVENT_FILTERS } from "./events.js";

/**
 * Bulk replay the spec's way ("list them and replay each one separately", 100 ms apart): the
 * filter form posts (CSRF-checked) and the page shows the matching events' count and where their
 * replays will go; then assets/bulk-replay.js, in the browser, fetches their ids and replays them
 * one request at a time with a 100 ms pause, showing progress, stoppable with Cancel, ending with
 * a summary. The server keeps no job: each replay is the same `requestReplay` as
 * POST /v1/events/{id}/replay (docs/dashboard.md says why).
 */

/** The most events one bulk replay from the dashboard lists; beyond it, narrow the filters or use `npm run -s replay`. */
export const BULK_REPLAY_MAX = 10_000;

const accountOf = (req: Request) => dashboardPrincipal(req).accountId;

/** Every matching event id, newest first, following the cursor; `truncated` past `max`. */
async function listMatchingIds(
  deps: ApiDeps,
  accountId: string,
  filter: Omit<EventFilter, "limit" | "cursor">,
  max: number,
): Promise<{ ids: string[]; truncated: boolean }> {
  const ids: string[] = [];
  let page: Page<EventListItem> | null = null;
  do {
    const cursor = page?.next_cursor ? paginationShape.cursor.parse(page.next_cursor) : undefined;
    page = await listEvents(deps, accountId, { ...filter, limit: 100, cursor });
    ids.push(...page.data.map((e) => e.event_id));
  } while (page.next_cursor && ids.length <= max);
  return { ids: ids.slice(0, max), truncated: ids.length > max };
}

/** The replay options (target URL, signing webhook) as the replay route reads them. */
function replayOptions(source: unknown) {
  const target_url = rawField(source, "target_url");
  const webhook_id = field(source, "webhook_id");
  return { ...(target_url ? { target_url } : {}), ...(webhook_id ? { webhook_id } : {}) };
}

export function bulkReplayPages(deps: ApiDeps): Router {
  const router = Router();

  const page = async (req: Request) => {
    const webhooks = (await listWebhooks(deps, accountOf(req), { limit: 100 })).data;
    return { title: "Bulk replay", nav: "events", scripts: ["/dashboard/assets/bulk-replay.js"], webhooks };
  };

  /**
   * The filter form. A link may carry the filters (Events links here with its own), never where
   * the replays go: the override URL and the webhook start empty, whatever the query says.
   */
  router.get("/bulk-replay", async (req, res) => {
    const filters = filterQuery(req, EVENT_FILTERS);
    render(res, "bulk-replay", {
      ...(await page(req)),
      filters: { status: "failed", ...filters },
      options: {},
      counted: null,
      destination: null,
      errors: {},
    });
  });

  /**
   * Counting is a POST (CSRF-checked): only a form of this dashboard sets where a run's replays
   * go. The run card then says it plainly (destination, signing webhook) before anything starts.
   */
  router.post("/bulk-replay", async (req, res) => {
    const filters = filterFields(req.body, EVENT_FILTERS);
    const options = replayOptions(req.body);
    const base = { ...(await page(req)), filters, options };
    const parsed = tryParse(listQuery, filters);
    const checked = tryParse(replayRequestSchema, options);
    const problems = [...(parsed.errors ?? []), ...(checked.errors ?? [])];
    let webhook: WebhookView | null = null;
    if (options.webhook_id) {
      try {
        webhook = toWebhookView(await findWebhook(deps, accountOf(req), options.webhook_id), deps.keyring);
      } catch (error) {
        if (!isAppError(error) || error.code !== "not_found") throw error;
        problems.push({ path: "webhook_id", message: "is not one of this account's webhooks" });
      }
    }
    if (!parsed.data || problems.length) {
      return render(res, "bulk-replay", { ...base, counted: null, destination: null, errors: byField(problems) }, 422);
    }
    const { ids, truncated } = await listMatchingIds(deps, accountOf(req), parsed.data, BULK_REPLAY_MAX);
    const destination = { target_url: options.target_url ?? null, webhook };
    render(res, "bulk-replay", { ...base, counted: { count: ids.length, truncated, max: BULK_REPLAY_MAX }, destination, errors: {} });
  });

  /** The ids to replay (JSON), listed when the person starts. */
  router.get("/bulk-replay/ids", async (req, res) => {
    const filter = parseOrThrow(listQuery, filterQuery(req, EVENT_FILTERS), "query");
    res.json(await listMatchingIds(deps, accountOf(req), filter, BULK_REPLAY_MAX));
  });

  /**
   * Replays one event (JSON): `{event_id, outcome: "replayed" | "expired" | "failed", message}`;
   * a refusal of that event is an outcome, not an error of the run.
   */
  router.post("/bulk-replay/replay", async (req, res) => {
    const eventId = parseOrThrow(resourceId, field(req.body, "event_id"), "event_id");
    const principal = dashboardPrincipal(req);
    try {
      const input = parseOrThrow(replayRequestSchema, replayOptions(req.body));
      const accepted = await requestReplay(deps, { accountId: principal.accountId, apiKeyId: principal.apiKeyId }, eventId, input);
      res.json({ event_id: eventId, outcome: "replayed", message: `${accepted.replays.length} replay(s) queued` });
    } catch (error) {
      if (!isAppError(error) || error.code === "unavailable" || error.code === "rate_limited") throw error;
      // The page is about events only: a missing one is said so, shortly.
      const message = error.code === "not_found" ? "event not found" : refusalInWords(error);
      res.json({ event_id: eventId, outcome: error.code === "payload_expired" ? "expired" : "failed", message });
    }
  });

  return router;
}
