import type { RequestHandler } from "express";

/**
 * The dashboard's own Content-Security-Policy, stricter than the rest of the API's (helmet's
 * defaults): only this origin's scripts, styles, images and requests; no inline script or style,
 * no eval, no frames, no plugins, forms only to this origin.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "object-src 'none'",
].join("; ");

export const dashboardHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader("Content-Security-Policy", DASHBOARD_CSP);
  res.setHeader("X-Frame-Options", "DENY");
  // Not no-referrer: with it, browsers send `Origin: null` on form posts, which the CSRF check refuses.
  res.setHeader("Referrer-Policy", "same-origin");
  next();
};
