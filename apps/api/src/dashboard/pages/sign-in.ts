import { Router } from "express";
import { endSession, inspectDashboardLink, redeemDashboardLink } from "@mailhooks/access";
import type { ApiDeps } from "../../deps.js";
import { sameOriginOnly } from "../csrf.js";
import { tooManyAttempts, type TokenLookups } from "../lookup-limit.js";
import { render } from "../render.js";
import { sessionTokenOf, setSessionCookie } from "../session.js";

/**
 * Signing in and out (docs/dashboard.md). Opening a link shows a page with a `Sign in`
 * button: only the POST redeems it, so a link previewer or a mail scanner that fetches the URL
 * does not use up the one-time link. (Signing out is behind the session: index.ts.) A link that
 * is not valid counts against the client's limit of requests without valid credentials
 * (lookup-limit.ts), checked before the link is looked up; a valid one never meets it.
 */

const REFUSALS: Record<string, string> = {
  unknown: "This sign-in link is not valid. Check that it was copied whole, or ask for a new one.",
  used: "This sign-in link has already been used: each link works once. Ask for a new one.",
  expired: "This sign-in link has expired: links work for 15 minutes. Ask for a new one.",
  revoked: "The API key that made this link has been revoked. Ask for a new link.",
};

export function signInPages(deps: ApiDeps, lookups: TokenLookups): Router {
  const router = Router();

  router.get("/sign-in/:token", async (req, res) => {
    const token = String(req.params.token);
    const found = await lookups.run(
      req,
      token,
      () => inspectDashboardLink(deps.prisma, token),
      (state) => state === "valid",
      { unknown: (state) => state === "unknown" },
    );
    if ("retryAfter" in found) return tooManyAttempts(res, found.retryAfter);
    const state = found.value;
    res.setHeader("Cache-Control", "no-store");
    if (state !== "valid")
      return render(res, "sign-in", { title: "Sign in", token: null, refusal: REFUSALS[state] }, state === "unknown" ? 404 : 410);
    render(res, "sign-in", { title: "Sign in", token, refusal: null });
  });

  router.post("/sign-in/:token", sameOriginOnly(deps), async (req, res) => {
    const token = String(req.params.token);
    const found = await lookups.run(
      req,
      token,
      () => redeemDashboardLink(deps.prisma, token),
      (r) => !("refused" in r),
      { unknown: (r) => "refused" in r && r.refused === "unknown" },
    );
    if ("retryAfter" in found) return tooManyAttempts(res, found.retryAfter);
    const result = found.value;
    res.setHeader("Cache-Control", "no-store");
    if ("refused" in result)
      return render(
        res,
        "sign-in",
        { title: "Sign in", token: null, refusal: REFUSALS[result.refused] },
        result.refused === "unknown" ? 404 : 410,
      );
    // A session this browser had before (another account, say) ends here.
    const previous = sessionTokenOf(req);
    if (previous) await endSession(deps.prisma, previous);
    setSessionCookie(req, res, deps, result.session.token);
    res.redirect(303, "/dashboard/webhooks");
  });

  return router;
}
