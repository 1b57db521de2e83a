import { Router, type Request, type Response } from "express";
import { z } from "zod";
import type { ApiDeps } from "../../deps.js";
import { AppError } from "../../errors.js";
import { paginationShape } from "../../http/pagination.js";
import { parseOrThrow } from "../../http/validate.js";
import { resourceId } from "../../routes/webhooks.js";
import { latestTestEvent, sendTestEvent, webhookHealth } from "../../services/webhook-health.js";
import {
  createWebhook,
  createWebhookSchema,
  deleteWebhook,
  findWebhook,
  listWebhooks,
  toWebhookView,
  updateWebhook,
  updateWebhookSchema,
} from "../../services/webhooks.js";
import { asList, byField, field, filterQuery, formErrors } from "../forms.js";
import { render } from "../render.js";
import { dashboardPrincipal } from "../session.js";

/**
 * Settings > Webhooks (spec: "enter the URL, select events, save"; CONTRACT.md sections 4 and
 * 4a): the list with each endpoint's health, "Add endpoint", and an endpoint's page (edit,
 * enable/disable, delete, send the test event again; its secret: webhook-secret.ts). Each handler
 * parses, calls the service the JSON routes call, and renders.
 */

const accountOf = (req: Request) => dashboardPrincipal(req).accountId;
const idOf = (req: Request) => parseOrThrow(resourceId, req.params.id, "id");
const listQuery = z.object(paginationShape);

export function webhookPages(deps: ApiDeps): Router {
  const router = Router();

  router.get("/webhooks", async (req, res) => {
    const page = await listWebhooks(deps, accountOf(req), parseOrThrow(listQuery, filterQuery(req, ["cursor"]), "query"));
    const health = await webhookHealth(deps, accountOf(req), page.data.map((w) => w.id));
    render(res, "webhooks/list", {
      title: "Webhooks",
      nav: "webhooks",
      webhooks: page.data.map((w) => ({ ...w, health: health.get(w.id)! })),
      nextCursor: page.next_cursor,
      notice: field(req.query, "deleted") ? "The endpoint was deleted. Its deliveries stay in the logs." : null,
    });
  });

  router.get("/webhooks/new", (_req, res) => {
    render(res, "webhooks/new", { title: "Add endpoint", nav: "webhooks", values: { url: "", events: [] }, errors: {} });
  });

  router.post("/webhooks", async (req, res) => {
    const values = { url: field(req.body, "url"), events: asList(req.body?.events) };
    try {
      const input = parseOrThrow(createWebhookSchema, values);
      const created = await createWebhook(deps, accountOf(req), input);
      render(res, "webhooks/created", { title: "Endpoint added", nav: "webhooks", webhook: created, secret: created.secret }, 201);
    } catch (error) {
      const errors = formErrors(error) ?? (error instanceof AppError && error.code === "conflict" ? [{ path: "form", message: error.message }] : null);
      if (!errors) throw error;
      render(res, "webhooks/new", { title: "Add endpoint", nav: "webhooks", values, errors: byField(errors) }, error instanceof AppError ? error.status : 422);
    }
  });

  router.get("/webhooks/:id", async (req, res) => {
    await showWebhook(req, res, {});
  });

  /** An endpoint's page; `extra` carries a form's values and problems, or a notice. */
  async function showWebhook(req: Request, res: Response, extra: Record<string, unknown>, status = 200) {
    const id = idOf(req);
    const webhook = toWebhookView(await findWebhook(deps, accountOf(req), id));
    const [health, testEvent] = await Promise.all([webhookHealth(deps, accountOf(req), [id]), latestTestEvent(deps, accountOf(req), id)]);
    const notices: Record<string, string> = {
      saved: "Saved.",
      enabled: "The endpoint is enabled: new events are delivered to it.",
      disabled: "The endpoint is disabled: it gets no new deliveries until you enable it.",
      tested: "A test event is on its way; its outcome shows below.",
    };
    render(
      res,
      "webhooks/show",
      {
        title: webhook.url,
        nav: "webhooks",
        webhook,
        health: health.get(id)!,
        testEvent,
        values: { url: webhook.url, events: webhook.events },
        errors: {},
        notice: notices[field(req.query, "done")] ?? null,
        ...extra,
      },
      status,
    );
  }

  router.post("/webhooks/:id", async (req, res) => {
    const values = { url: field(req.body, "url"), events: asList(req.body?.events) };
    try {
      await updateWebhook(deps, accountOf(req), idOf(req), parseOrThrow(updateWebhookSchema, values));
    } catch (error) {
      const errors = formErrors(error);
      if (!errors) throw error;
      return showWebhook(req, res, { values, errors: byField(errors) }, 422);
    }
    res.redirect(303, `/dashboard/webhooks/${encodeURIComponent(idOf(req))}?done=saved`);
  });

  router.post("/webhooks/:id/status", async (req, res) => {
    const status = parseOrThrow(updateWebhookSchema.shape.status, field(req.body, "status") || undefined, "status");
    if (!status) throw new AppError("validation_error", "status: must be enabled or disabled", [{ path: "status", message: "must be enabled or disabled" }]);
    await updateWebhook(deps, accountOf(req), idOf(req), { status });
    res.redirect(303, `/dashboard/webhooks/${encodeURIComponent(idOf(req))}?done=${status}`);
  });

  router.post("/webhooks/:id/test", async (req, res) => {
    await sendTestEvent(deps, accountOf(req), idOf(req));
    res.redirect(303, `/dashboard/webhooks/${encodeURIComponent(idOf(req))}?done=tested#test-event`);
  });

  /** The test event's outcome, polled by htmx while it is pending. */
  router.get("/webhooks/:id/test-event", async (req, res) => {
    const id = idOf(req);
    render(res, "webhooks/test-event", { webhook: { id }, testEvent: await latestTestEvent(deps, accountOf(req), id) });
  });

  router.get("/webhooks/:id/delete", async (req, res) => {
    const webhook = toWebhookView(await findWebhook(deps, accountOf(req), idOf(req)));
    render(res, "webhooks/delete", { title: "Delete endpoint", nav: "webhooks", webhook });
  });

  router.post("/webhooks/:id/delete", async (req, res) => {
    await deleteWebhook(deps, accountOf(req), idOf(req));
    res.redirect(303, "/dashboard/webhooks?deleted=1");
  });

  return router;
}
