import { parse as parseCookies, serialize } from "cookie";
import type { Request, RequestHandler, Response } from "express";
import { authenticateSession, DASHBOARD_SESSION_IDLE_MS, type DashboardPrincipal } from "@mailhooks/access";
import type { ApiDeps } from "../deps.js";
import { isHttps } from "../http/public-url.js";
import { csrfTokenFor } from "./csrf.js";
import { tooManyAttempts, type TokenLookups } from "./lookup-limit.js";
import { render } from "./render.js";

/**
 * The dashboard's session cookie (docs/dashboard.md): HttpOnly, SameSite=Strict, Path
 * /dashboard, Secure when people reach the API over https. Its value is the session token;
 * PostgreSQL holds only its hash (@mailhooks/access). Every page behind `requireSession` has
 * `req.dashboard` and, for the templates, `res.locals.session` and `res.locals.csrf`.
 */

export const SESSION_COOKIE = "mailhooks_dashboard";

declare module "express-serve-static-core" {
  interface Request {
    dashboard?: { principal: DashboardPrincipal; sessionToken: string; csrfToken: string };
  }
}

export function sessionTokenOf(req: Request): string | undefined {
  const header = req.headers.cookie;
  return header ? parseCookies(header)[SESSION_COOKIE] : undefined;
}

export function setSessionCookie(req: Request, res: Response, deps: ApiDeps, token: string): void {
  res.append(
    "Set-Cookie",
    serialize(SESSION_COOKIE, token, {
      httpOnly: true,
      sameSite: "strict",
      secure: isHttps(req, deps.config),
      path: "/dashboard",
      // As long as the server keeps an idle session: renewed with every page (requireSession).
      maxAge: DASHBOARD_SESSION_IDLE_MS / 1000,
    }),
  );
}

export function clearSessionCookie(req: Request, res: Response, deps: ApiDeps): void {
  // Replaces the renewal requireSession may have set on this response.
  const others = ([] as string[])
    .concat((res.getHeader("Set-Cookie") as string[] | string | undefined) ?? [])
    .filter((c) => !c.startsWith(`${SESSION_COOKIE}=`));
  res.setHeader("Set-Cookie", others);
  res.append(
    "Set-Cookie",
    serialize(SESSION_COOKIE, "", { httpOnly: true, sameSite: "strict", secure: isHttps(req, deps.config), path: "/dashboard", maxAge: 0 }),
  );
}

/**
 * Lets only live sessions through; anything else gets the "sign in" page (401) and loses its
 * cookie; a client past the limit of invalid tokens gets 429 before its cookie is looked up
 * (lookup-limit.ts). `req.principal` is set too, so the API's per-account rate limit applies to
 * the dashboard.
 */
export function requireSession(deps: ApiDeps, lookups: TokenLookups): RequestHandler {
  return async (req, res, next) => {
    const token = sessionTokenOf(req);
    let principal: DashboardPrincipal | null = null;
    if (token) {
      // An invalid cookie meets the limiter of requests without valid credentials before PostgreSQL.
      const found = await lookups.run(
        req,
        token,
        () => authenticateSession(deps.prisma, token),
        (p) => p !== null,
        { remember: true },
      );
      if ("retryAfter" in found) return tooManyAttempts(res, found.retryAfter);
      principal = found.value;
    }
    if (!token || !principal) {
      if (token) clearSessionCookie(req, res, deps);
      // SameSite=Strict: a link followed from another site arrives without the cookie; one
      // click from this page (same-site) arrives with it, if there is a session.
      const continueTo = req.method === "GET" && req.get("sec-fetch-site") === "cross-site" ? req.originalUrl : null;
      render(res, "signed-out", { title: "Sign in", reason: token ? "ended" : "none", continueTo }, 401);
      return;
    }
    const csrfToken = csrfTokenFor(token);
    req.dashboard = { principal, sessionToken: token, csrfToken };
    req.principal = { accountId: principal.accountId, apiKeyId: principal.apiKeyId };
    res.locals.session = principal;
    res.locals.csrf = csrfToken;
    res.setHeader("Cache-Control", "no-store");
    // Idle expiry slides on the server (last_seen_at); the cookie's lifetime slides with it.
    setSessionCookie(req, res, deps, token);
    next();
  };
}

/** The signed-in principal; only valid behind requireSession. */
export function dashboardPrincipal(req: Request): DashboardPrincipal {
  if (!req.dashboard) throw new Error("dashboard route without requireSession");
  return req.dashboard.principal;
}
