import { Router, type Request } from "express";
import type { ApiDeps } from "../../deps.js";
import { querySchema as auditQuery } from "../../routes/audit.js";
import { querySchema as deliveriesQuery } from "../../routes/deliveries.js";
import { apiKeyNames } from "../../services/api-key-names.js";
import { listAuditEntries } from "../../services/audit.js";
import { listDeliveries } from "../../services/deliveries.js";
import { listWebhooks } from "../../services/webhooks.js";
import { byField, filterQuery, tryParse } from "../forms.js";
import { render } from "../render.js";
import { dashboardPrincipal } from "../session.js";

/**
 * The two logs (docs/api.md, "Deliveries log"): Deliveries (every attempt, filterable by event and
 * webhook) and the Audit log (every replay: who, when, which event, where, what came back).
 * Filters are validated by the JSON routes' own schemas.
 */

const accountOf = (req: Request) => dashboardPrincipal(req).accountId;

export function logPages(deps: ApiDeps): Router {
  const router = Router();

  router.get("/deliveries", async (req, res) => {
    const filters = filterQuery(req, ["event_id", "webhook_id", "cursor"]);
    const parsed = tryParse(deliveriesQuery, filters);
    const [page, webhooks] = await Promise.all([
      parsed.data ? listDeliveries(deps, accountOf(req), parsed.data) : { data: [], next_cursor: null },
      // For the webhook filter's choices (live webhooks; a deleted one can still be named by id).
      listWebhooks(deps, accountOf(req), { limit: 100 }),
    ]);
    const filtered = filters.event_id !== undefined || filters.webhook_id !== undefined;
    render(
      res,
      "logs/deliveries",
      { title: "Deliveries", nav: "deliveries", filters, filtered, errors: byField(parsed.errors), page, webhooks: webhooks.data },
      parsed.errors ? 422 : 200,
    );
  });

  router.get("/audit-log", async (req, res) => {
    const filters = filterQuery(req, ["event_id", "since", "until", "cursor"]);
    const parsed = tryParse(auditQuery, filters);
    const page = parsed.data ? await listAuditEntries(deps, accountOf(req), parsed.data) : { data: [], next_cursor: null };
    const names = await apiKeyNames(
      deps,
      accountOf(req),
      page.data.map((e) => e.api_key_id),
    );
    const entries = page.data.map((e) => ({ ...e, api_key_name: names.get(e.api_key_id) ?? null }));
    const filtered = ["event_id", "since", "until"].some((name) => filters[name] !== undefined);
    render(
      res,
      "logs/audit",
      { title: "Audit log", nav: "audit", filters, filtered, errors: byField(parsed.errors), page: { ...page, data: entries } },
      parsed.errors ? 422 : 200,
    );
  });

  return router;
}
