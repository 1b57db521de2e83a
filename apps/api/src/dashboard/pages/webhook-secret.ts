import { Router, type Request } from "express";
import type { ApiDeps } from "../../deps.js";
import { parseOrThrow } from "../../http/validate.js";
import { resourceId } from "../../routes/webhooks.js";
import { getWebhookSecret, rotateSecretSchema, rotateWebhookSecret } from "../../services/webhook-secrets.js";
import { getWebhook } from "../../services/webhooks.js";
import { field } from "../forms.js";
import { render } from "../render.js";
import { dashboardPrincipal } from "../session.js";

/**
 * A webhook's signing secret (docs/api.md, "Webhooks"): revealed after a confirmation, and
 * rotated with a grace period; either way shown once, on a page that is never stored.
 */

const accountOf = (req: Request) => dashboardPrincipal(req).accountId;
const idOf = (req: Request) => parseOrThrow(resourceId, req.params.id, "id");

/** The grace periods offered for a rotation, in seconds (the API takes any from 0 to 7 days). */
const GRACE_CHOICES = [
  { seconds: 0, label: "none: the new secret signs at once" },
  { seconds: 3_600, label: "1 hour" },
  { seconds: 86_400, label: "24 hours" },
  { seconds: 604_800, label: "7 days" },
];

export function webhookSecretPages(deps: ApiDeps): Router {
  const router = Router();

  router.get("/webhooks/:id/secret", async (req, res) => {
    const webhook = await getWebhook(deps, accountOf(req), idOf(req));
    render(res, "webhooks/secret", { title: "Signing secret", nav: "webhooks", webhook, secret: null });
  });

  /** Reveals the secret: a POST (after the confirmation page) so that it never sits in a URL or a history. */
  router.post("/webhooks/:id/secret", async (req, res) => {
    const id = idOf(req);
    const webhook = await getWebhook(deps, accountOf(req), id);
    render(res, "webhooks/secret", {
      title: "Signing secret",
      nav: "webhooks",
      webhook,
      secret: await getWebhookSecret(deps, accountOf(req), id),
    });
  });

  router.get("/webhooks/:id/rotate", async (req, res) => {
    const webhook = await getWebhook(deps, accountOf(req), idOf(req));
    render(res, "webhooks/rotate", {
      title: "Rotate the secret",
      nav: "webhooks",
      webhook,
      choices: GRACE_CHOICES,
      rotated: null,
      errors: {},
    });
  });

  /** Rotates (POST /v1/webhooks/{id}/secret/rotate's service) and shows the new secret once. */
  router.post("/webhooks/:id/rotate", async (req, res) => {
    const id = idOf(req);
    const grace = field(req.body, "grace_seconds");
    const { grace_seconds } = parseOrThrow(rotateSecretSchema, grace === "" ? {} : { grace_seconds: Number(grace) });
    const rotated = await rotateWebhookSecret(deps, accountOf(req), id, grace_seconds);
    const webhook = await getWebhook(deps, accountOf(req), id);
    render(res, "webhooks/rotate", { title: "Secret rotated", nav: "webhooks", webhook, choices: GRACE_CHOICES, rotated, errors: {} });
  });

  return router;
}
