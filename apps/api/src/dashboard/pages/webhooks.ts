import { Router, type Request, type Response } from "express";
import { z } from "zod";
import type { ApiDeps } from "../../deps.js";
import { invalidInput, isAppError } from "../../errors.js";
import { paginationShape } from "../../http/pagination.js";
import { parseOrThrow } from "../../http/validate.js";
import { resourceId } from "../../routes/webhooks.js";
import {
  latestTestDelivery,
  requestTestDelivery,
  testDeliveryRequestSchema,
  exampleKindOf,
  webhookHealth,
  webhookWaitingWork,
} from "../../services/webhook-health.js";
import { editedHeaders } from "../../services/webhook-options.js";
import { createWebhookSchema, updateWebhookSchema } from "../../services/webhook-input.js";
import {
  createWebhook,
  currentHeaders,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  updateWebhook,
  type WebhookView,
} from "../../services/webhooks.js";
import { asLines, asList, asOptionalInteger, byField, field, filterQuery, formErrors, rawField } from "../forms.js";
import { webhookName } from "../present.js";
import { refusalInWords } from "../refusal-words.js";
import { render } from "../render.js";
import { dashboardPrincipal } from "../session.js";

/**
 * Settings > Webhooks (spec: "enter the URL, select events, save"; docs/api.md, "Webhooks" and
 * 4a): the list with each webhook's health, "Add webhook", and a webhook's page (edit,
 * enable, pause, resume and disable, delete, send a test event of a chosen kind; its secret: webhook-secret.ts).
 * Each handler parses, calls the service the JSON routes call, and renders. Header values are
 * write-only here too: typed once, then shown as `***`, never rendered back (not even after a
 * refused form).
 */

const accountOf = (req: Request) => dashboardPrincipal(req).accountId;
const idOf = (req: Request) => parseOrThrow(resourceId, req.params.id, "id");
const listQuery = z.object(paginationShape);

/** Rows for new headers offered by a form. */
const NEW_HEADER_ROWS = 3;

/** What a webhook form shows back: never a header value. */
interface FormValues {
  url: string;
  events: string[];
  rate_limit: string;
  inbox_ids: string;
  header_names: string[];
  signature_scheme: string;
}

const emptyValues = (): FormValues => ({
  url: "",
  events: [],
  rate_limit: "",
  inbox_ids: "",
  header_names: [],
  signature_scheme: "service",
});

const valuesOf = (w: WebhookView): FormValues => ({
  url: w.url ?? "",
  events: w.events,
  rate_limit: w.rate_limit === null ? "" : String(w.rate_limit),
  inbox_ids: (w.inbox_ids ?? []).join(", "),
  header_names: [],
  signature_scheme: w.signature_scheme,
});

/**
 * A webhook form's fields in the JSON routes' shape. A field the form did not send at all keeps
 * its value on an edit (undefined); an empty rate limit or inbox list is null (no limit, every
 * inbox). New headers come as rows of `header_name`/`header_value`; a row left empty is skipped.
 */
function formInput(body: unknown) {
  const fields = (body ?? {}) as Record<string, unknown>;
  const names = asList(fields.header_name).map((n) => n.trim());
  const values = asList(fields.header_value);
  // fromEntries, not assignment: a row named `__proto__` stays a key, for the schema to refuse.
  const added: Record<string, string> = Object.fromEntries(
    names.map((name, i) => [name, values[i] ?? ""] as const).filter(([name, value]) => name !== "" || value !== ""),
  );
  return {
    shown: {
      url: rawField(body, "url"),
      events: asList(fields.events),
      rate_limit: field(body, "rate_limit"),
      inbox_ids: typeof fields.inbox_ids === "string" ? fields.inbox_ids : "",
      header_names: names.filter((n) => n !== ""),
      signature_scheme: field(body, "signature_scheme"),
    } satisfies FormValues,
    input: {
      // A listen webhook's form has no URL field (it has no URL): an edit then leaves it out.
      ...("url" in fields ? { url: rawField(body, "url") } : {}),
      events: asList(fields.events),
      ...("rate_limit" in fields ? { rate_limit: asOptionalInteger(field(body, "rate_limit")) } : {}),
      ...("inbox_ids" in fields ? { inbox_ids: asLines(field(body, "inbox_ids")) } : {}),
      ...("signature_scheme" in fields ? { signature_scheme: field(body, "signature_scheme") } : {}),
    },
    added,
    removed: asList(fields.remove_headers),
  };
}

export function webhookPages(deps: ApiDeps): Router {
  const router = Router();

  router.get("/webhooks", async (req, res) => {
    const page = await listWebhooks(deps, accountOf(req), parseOrThrow(listQuery, filterQuery(req, ["cursor"]), "query"));
    const health = await webhookHealth(
      deps,
      accountOf(req),
      page.data.map((w) => w.id),
    );
    render(res, "webhooks/list", {
      title: "Webhooks",
      nav: "webhooks",
      webhooks: page.data.map((w) => ({ ...w, health: health.get(w.id)! })),
      nextCursor: page.next_cursor,
      notice: field(req.query, "deleted") ? "The webhook was deleted. Its deliveries stay in the logs." : null,
    });
  });

  router.get("/webhooks/new", (_req, res) => {
    render(res, "webhooks/new", {
      title: "Add webhook",
      nav: "webhooks",
      values: emptyValues(),
      errors: {},
      newHeaderRows: NEW_HEADER_ROWS,
    });
  });

  router.post("/webhooks", async (req, res) => {
    const form = formInput(req.body);
    try {
      const input = parseOrThrow(createWebhookSchema, {
        ...form.input,
        ...(Object.keys(form.added).length ? { headers: form.added } : {}),
      });
      const { webhook } = await createWebhook(deps, accountOf(req), input);
      render(res, "webhooks/created", { title: "Webhook added", nav: "webhooks", webhook, secret: webhook.secret }, 201);
    } catch (error) {
      const errors =
        formErrors(error) ?? (isAppError(error) && error.code === "conflict" ? [{ path: "form", message: refusalInWords(error) }] : null);
      if (!errors) throw error;
      render(
        res,
        "webhooks/new",
        { title: "Add webhook", nav: "webhooks", values: form.shown, errors: byField(errors), newHeaderRows: NEW_HEADER_ROWS },
        isAppError(error) ? error.status : 422,
      );
    }
  });

  router.get("/webhooks/:id", async (req, res) => {
    await showWebhook(req, res, {});
  });

  /** A webhook's page; `extra` carries a form's values and problems, or a notice. */
  async function showWebhook(req: Request, res: Response, extra: Record<string, unknown>, status = 200) {
    const id = idOf(req);
    const webhook = await getWebhook(deps, accountOf(req), id);
    const [health, testDelivery, waitingWork] = await Promise.all([
      webhookHealth(deps, accountOf(req), [id]),
      latestTestDelivery(deps, accountOf(req), id),
      webhookWaitingWork(deps, id),
    ]);
    const notices: Record<string, string> = {
      saved: "Saved.",
      enabled: "The webhook is enabled: new events are delivered to it.",
      disabled: "The webhook is disabled: it gets no new deliveries until you enable it.",
      paused:
        webhook.mode === "listen"
          ? "The webhook is paused: pulls get nothing until you resume it; what arrives meanwhile waits and is not lost."
          : "The webhook is paused: nothing is sent to its URL until you resume it; what arrives meanwhile waits and is not lost.",
      resumed:
        webhook.mode === "listen"
          ? "The webhook is resumed: what waited is handed out to pulls, oldest first."
          : "The webhook is resumed: what waited is being sent, oldest first.",
      tested: "A test event is on its way; its outcome shows below.",
    };
    render(
      res,
      "webhooks/show",
      {
        title: webhookName(webhook),
        nav: "webhooks",
        webhook,
        health: health.get(id)!,
        testDelivery,
        waitingWork,
        values: valuesOf(webhook),
        errors: {},
        newHeaderRows: NEW_HEADER_ROWS,
        existingHeaders: Object.keys(webhook.headers),
        notice: notices[field(req.query, "done")] ?? null,
        ...extra,
      },
      status,
    );
  }

  router.post("/webhooks/:id", async (req, res) => {
    const form = formInput(req.body);
    try {
      // PATCH replaces the whole set of headers: the edit (some removed, some added) is merged
      // into the current set first; untouched, the set is left as it is.
      const headersChanged = form.removed.length > 0 || Object.keys(form.added).length > 0;
      const headers = headersChanged
        ? editedHeaders(await currentHeaders(deps, accountOf(req), idOf(req)), form.removed, form.added)
        : undefined;
      await updateWebhook(
        deps,
        accountOf(req),
        idOf(req),
        parseOrThrow(updateWebhookSchema, { ...form.input, ...(headers ? { headers } : {}) }),
      );
    } catch (error) {
      // `standard` for a secret made before standard base64 (409) is a problem of that field.
      const errors =
        formErrors(error) ??
        (isAppError(error, "conflict") && error.reason === "secret_not_standard"
          ? [{ path: "signature_scheme", message: refusalInWords(error) }]
          : null);
      if (!errors) throw error;
      return showWebhook(req, res, { values: form.shown, errors: byField(errors) }, isAppError(error) ? error.status : 422);
    }
    res.redirect(303, `/dashboard/webhooks/${encodeURIComponent(idOf(req))}?done=saved`);
  });

  /** Enable, Pause, Resume (enabled again) and Disable: PATCH's `status` (docs/api.md, "Webhooks"). */
  router.post("/webhooks/:id/status", async (req, res) => {
    const status = parseOrThrow(updateWebhookSchema.shape.status, field(req.body, "status") || undefined, "status");
    if (!status) throw invalidInput([{ path: "status", message: "must be enabled, paused or disabled" }]);
    const before = await getWebhook(deps, accountOf(req), idOf(req));
    await updateWebhook(deps, accountOf(req), idOf(req), { status });
    const done = status === "enabled" && before.status === "paused" ? "resumed" : status;
    res.redirect(303, `/dashboard/webhooks/${encodeURIComponent(idOf(req))}?done=${done}`);
  });

  router.post("/webhooks/:id/test", async (req, res) => {
    const kind = field(req.body, "event_type");
    const { event_type } = parseOrThrow(testDeliveryRequestSchema, kind === "" ? {} : { event_type: kind });
    await requestTestDelivery(deps, accountOf(req), idOf(req), exampleKindOf(event_type));
    res.redirect(303, `/dashboard/webhooks/${encodeURIComponent(idOf(req))}?done=tested#test-event`);
  });

  /** The test event's outcome, polled by htmx while it is pending. */
  router.get("/webhooks/:id/test-event", async (req, res) => {
    const id = idOf(req);
    const [webhook, testDelivery] = await Promise.all([getWebhook(deps, accountOf(req), id), latestTestDelivery(deps, accountOf(req), id)]);
    render(res, "webhooks/test-event", { webhook, testDelivery });
  });

  router.get("/webhooks/:id/delete", async (req, res) => {
    const webhook = await getWebhook(deps, accountOf(req), idOf(req));
    render(res, "webhooks/delete", { title: "Delete webhook", nav: "webhooks", webhook });
  });

  router.post("/webhooks/:id/delete", async (req, res) => {
    await deleteWebhook(deps, accountOf(req), idOf(req));
    res.redirect(303, "/dashboard/webhooks?deleted=1");
  });

  return router;
}
