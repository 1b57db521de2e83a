import { randomUUID } from "node:crypto";
import type { ErrorRequestHandler, RequestHandler } from "express";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { getLogger } from "@mailhooks/logger";
import { AppError } from "../errors.js";
import { render } from "./render.js";

/**
 * The dashboard's answer to an error: a page in words (never a code, a stack or JSON), with the
 * status the API would give. Errors a form can show beside its fields are handled by the page
 * itself; this is for the rest.
 */

const logger = getLogger("dashboard");
/** The path as logged: a sign-in link's token never reaches a log. */
const loggedPath = (path: string) => path.replace(/\/sign-in\/[^/]*/, "/sign-in/[token]");

const HEADINGS: Partial<Record<AppError["code"], string>> = {
  not_found: "Not found",
  conflict: "That cannot be done now",
  payload_expired: "The payload is gone",
  validation_error: "Some input is not valid",
  rate_limited: "Too many requests",
  unavailable: "The service is unavailable",
  payload_too_large: "Too much data",
};

const NOT_FOUND_MESSAGE = "There is nothing here for your account: it may have been deleted, or the link may be mistyped.";

export const notFoundPage: RequestHandler = (_req, res) => {
  render(res, "error", { title: "Not found", heading: "Not found", message: NOT_FOUND_MESSAGE }, 404);
};

export const dashboardErrorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  if (res.headersSent) return;
  let appError: AppError | null = error instanceof AppError ? error : null;
  if (!appError && (error as { type?: string })?.type === "entity.too.large") appError = new AppError("payload_too_large", "the form is too large");
  // Express's own client errors (a static file path that leaves the assets folder, a form that
  // cannot be read): nothing here for the person.
  const status = (error as { status?: unknown })?.status;
  if (!appError && typeof status === "number" && status >= 400 && status < 500) {
    appError = status === 403 || status === 404 ? new AppError("not_found", "not found") : new AppError("validation_error", "the request could not be read");
  }
  if (!appError && isInfrastructureError(error)) {
    logger.warn("dependency unavailable", { path: loggedPath(req.path), error: (error as Error).message });
    appError = new AppError("unavailable", "the database or the queue is unreachable right now; try again in a moment");
  }
  if (!appError) {
    const id = randomUUID();
    logger.error("unhandled error", { errorId: id, path: loggedPath(req.path), error: (error as Error)?.message, stack: (error as Error)?.stack });
    render(res, "error", { title: "Error", heading: "Something went wrong on our side", message: `Try again; if it keeps happening, give this reference to your operator: ${id}.` }, 500);
    return;
  }
  for (const [name, value] of Object.entries(appError.headers ?? {})) res.setHeader(name, value);
  const message = appError.code === "not_found" ? NOT_FOUND_MESSAGE : capitalize(appError.message);
  render(res, "error", { title: HEADINGS[appError.code] ?? "Error", heading: HEADINGS[appError.code] ?? "Error", message }, appError.status);
};

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1) + (/[.!?]$/.test(text) ? "" : ".");
}
