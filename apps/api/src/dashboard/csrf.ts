import { createHmac, timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import type { ApiDeps } from "../deps.js";
import { publicBaseUrl } from "../http/public-url.js";
import { render } from "./render.js";

/**
 * CSRF protection of every dashboard state change. Two checks, either of which refuses:
 * - the synchronizer token: an HMAC of the session token, so it needs no storage and no other
 *   site can compute it (the session cookie is HttpOnly); forms carry it as `_csrf`, htmx and
 *   the bulk-replay script as the `X-CSRF-Token` header;
 * - the browser's own provenance headers: `Sec-Fetch-Site` must not be cross-site and `Origin`,
 *   when sent, must be this dashboard's origin.
 * The session cookie being SameSite=Strict is a third line.
 */

export function csrfTokenFor(sessionToken: string): string {
  return createHmac("sha256", sessionToken).update("dashboard csrf v1").digest("base64url");
}

function sameToken(given: unknown, expected: string): boolean {
  if (typeof given !== "string") return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Refuses requests that a browser says come from another site (used before any session exists too). */
export function sameOriginOnly(deps: ApiDeps): RequestHandler {
  return (req, res, next) => {
    const site = req.get("sec-fetch-site");
    const origin = req.get("origin");
    const ownOrigins = new Set([new URL(publicBaseUrl(req, deps.config)).origin, `${req.protocol}://${req.get("host")}`]);
    if ((site && site !== "same-origin" && site !== "none") || (origin && !ownOrigins.has(origin))) {
      render(
        res,
        "error",
        {
          title: "Refused",
          heading: "This request came from another site",
          message: "The dashboard only accepts forms sent from its own pages. Go back to the dashboard and try again from there.",
        },
        403,
      );
      return;
    }
    next();
  };
}

/** Refuses a state change without this session's token (behind requireSession). */
export function requireCsrfToken(): RequestHandler {
  return (req, res, next) => {
    if (req.method === "GET" || req.method === "HEAD") return next();
    const expected = req.dashboard?.csrfToken ?? "";
    const given = req.get("x-csrf-token") ?? (req.body as Record<string, unknown> | undefined)?._csrf;
    if (!sameToken(given, expected)) {
      render(
        res,
        "error",
        {
          title: "Refused",
          heading: "This form has expired",
          message:
            "The form was not sent by a page of this session (it may be from before you signed in again). Reload the page and try again.",
        },
        403,
      );
      return;
    }
    next();
  };
}

/** Both checks on every request that is not a GET or HEAD (behind requireSession). */
export function protectStateChanges(deps: ApiDeps): RequestHandler {
  const origin = sameOriginOnly(deps);
  const token = requireCsrfToken();
  return (req, res, next) => {
    if (req.method === "GET" || req.method === "HEAD") return next();
    origin(req, res, (error?: unknown) => (error ? next(error) : token(req, res, next)));
  };
}
