import { Router, type Request, type Response } from "express";
import type { ApiDeps } from "../../deps.js";
import { AppError, isAppError } from "../../errors.js";
import { parseOrThrow } from "../../http/validate.js";
import { listQuery } from "../../routes/events.js";
import { resourceId } from "../../routes/webhooks.js";
import { eventTimeline, payloadExpiry } from "../../services/event-timeline.js";
import { listEvents, readEventDetail } from "../../services/events.js";
import { replayRequestSchema, requestReplay } from "../../services/replays.js";
import { byField, field, filterQuery, formErrors, rawField, tryParse } from "../forms.js";
import { render } from "../render.js";
import { refusalInWords } from "../refusal-words.js";
import { dashboardPrincipal } from "../session.js";

/**
 * Events (docs/api.md, "Events") and one event's page: envelope, destinations, the newest
 * attempts (TIMELINE_ATTEMPTS, with the total and a link to the deliveries log), and `Replay`
 * (docs/api.md, "Replay") to the original destinations or an override URL, made as the session's API key
 * (its id goes to the audit log).
 */

/**
 * The largest envelope, in UTF-8 bytes, that the page also shows indented ("Readable"): that
 * needs a parse, which for an envelope of up to 10 MiB is not worth it. Larger ones show their
 * exact bytes only.
 */
export const READABLE_ENVELOPE_MAX_BYTES = 256 * 1024;

/** The envelope indented for people, or null when there is none or it is too large (READABLE_ENVELOPE_MAX_BYTES). */
function readable(payload: string | null): string | null {
  if (payload === null || Buffer.byteLength(payload, "utf8") > READABLE_ENVELOPE_MAX_BYTES) return null;
  return JSON.stringify(JSON.parse(payload), null, 2);
}

/** The filters of GET /v1/events, validated by that route's own schema. */
export const EVENT_FILTERS = ["inbox_id", "event_type", "status", "since", "until"] as const;

const accountOf = (req: Request) => dashboardPrincipal(req).accountId;

/** Every delivery row of an event, counted once already by its destinations' `attempts`. */
const attemptsOf = (event: { destinations: { attempts: number }[] }) => event.destinations.reduce((sum, d) => sum + d.attempts, 0);

export function eventPages(deps: ApiDeps): Router {
  const router = Router();

  router.get("/events", async (req, res) => {
    const filters = filterQuery(req, [...EVENT_FILTERS, "cursor"]);
    const parsed = tryParse(listQuery, filters);
    const page = parsed.data ? await listEvents(deps, accountOf(req), parsed.data) : { data: [], next_cursor: null };
    const filtered = EVENT_FILTERS.some((name) => filters[name] !== undefined);
    render(
      res,
      "events/list",
      { title: "Events", nav: "events", filters, filtered, errors: byField(parsed.errors), page },
      parsed.errors ? 422 : 200,
    );
  });

  router.get("/events/:id", async (req, res) => {
    await showEvent(req, res, {});
  });

  async function showEvent(req: Request, res: Response, extra: Record<string, unknown>, status = 200) {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const { event, payload } = await readEventDetail(deps, accountOf(req), id);
    // After the event: its timeline then counts every attempt behind the status read.
    const timeline = await eventTimeline(deps, accountOf(req), id, { attemptsTotal: attemptsOf(event) });
    const replayed = Number(field(req.query, "replayed")) || 0;
    render(
      res,
      "events/show",
      {
        title: `Event ${event.event_id}`,
        nav: "events",
        event,
        timeline,
        payload: {
          bytes: payload,
          readable: readable(payload),
          readableMaxBytes: READABLE_ENVELOPE_MAX_BYTES,
          expiry: payloadExpiry(deps, new Date(event.created_at), payload !== null),
        },
        replay: {
          values: { target_url: "", webhook_id: event.destinations.length === 1 ? event.destinations[0].webhook_id : "" },
          errors: {},
        },
        notice: replayed
          ? `${replayed === 1 ? "A replay is" : `${replayed} replays are`} on the way; the outcome shows below when the attempt ends.`
          : null,
        ...extra,
      },
      status,
    );
  }

  /** The event's activity (timeline), polled by htmx while a retry or a replay is pending: it reads no payload. */
  router.get("/events/:id/activity", async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const { event } = await readEventDetail(deps, accountOf(req), id, { payload: false });
    const timeline = await eventTimeline(deps, accountOf(req), id, { attemptsTotal: attemptsOf(event) });
    render(res, "events/activity", { event, timeline });
  });

  router.post("/events/:id/replay", async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const values = { target_url: rawField(req.body, "target_url"), webhook_id: field(req.body, "webhook_id") };
    let replays: number;
    try {
      const input = parseOrThrow(replayRequestSchema, {
        ...(values.target_url ? { target_url: values.target_url } : {}),
        ...(values.webhook_id ? { webhook_id: values.webhook_id } : {}),
      });
      replays = (await requestReplay(deps, { accountId: accountOf(req), apiKeyId: dashboardPrincipal(req).apiKeyId }, id, input)).replays
        .length;
    } catch (error) {
      // The problems a person can fix here are shown beside the form; a missing event is a 404 page.
      const errors =
        formErrors(error) ??
        (isAppError(error) && (error.code === "conflict" || error.code === "payload_expired")
          ? [{ path: "form", message: refusalInWords(error) }]
          : null);
      if (!errors) throw error;
      return showEvent(req, res, { replay: { values, errors: byField(errors) } }, (error as AppError).status);
    }
    res.redirect(303, `/dashboard/events/${encodeURIComponent(id)}?replayed=${replays}#activity`);
  });

  return router;
}
