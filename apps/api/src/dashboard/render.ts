import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Response } from "express";
import { Eta } from "eta";
import { present } from "./present.js";

/**
 * Server-side rendering of the dashboard: Eta templates under ./views, every `<%= %>` escaped
 * (`& < > " '`); raw output (`<%~ %>`) is only used to include templates and for the HTML that
 * the presenters escape themselves (`h.breakable`). Templates receive `it` = the page's data +
 * `session` and `csrf` (set by the session middleware) + `h`, the presentation helpers
 * (present.ts). No rule lives in a template: they only show what the services decided.
 */

/**
 * The folder of this module's sources: views and assets are not compiled, so a build (dist/)
 * reads them from src/ beside it.
 */
function sourceDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const fromDist = here.replace(/([\\/])dist([\\/]dashboard)$/, "$1src$2");
  return existsSync(path.join(here, "views")) ? here : fromDist;
}

export const DASHBOARD_SOURCE_DIR = sourceDir();
export const VIEWS_DIR = path.join(DASHBOARD_SOURCE_DIR, "views");
export const ASSETS_DIR = path.join(DASHBOARD_SOURCE_DIR, "assets");

const eta = new Eta({ views: VIEWS_DIR, cache: true, autoEscape: true, autoTrim: [false, "nl"] });

/** Renders `view` (a path under views/, without `.eta`) with `data` and sends it as HTML. */
export function render(res: Response, view: string, data: Record<string, unknown> = {}, status = 200): void {
  const html = eta.render(view, { ...res.locals, ...data, h: present(new Date()) });
  res.status(status).type("html").send(html);
}
