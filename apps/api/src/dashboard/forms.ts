import type { Request } from "express";
import { z } from "zod";
import { isAppError, validationError, type ErrorDetail } from "../errors.js";
import { refusalInWords } from "./refusal-words.js";

/**
 * Reading what browsers send: HTML forms post `application/x-www-form-urlencoded` (a repeated
 * field, like the event checkboxes, arrives as an array); a GET form sends every field, empty
 * ones included. The rules themselves are the JSON routes' schemas: these helpers only adapt
 * the shape.
 */

/** Always a list: no checkbox ticked is an absent field, one ticked a string. */
export function asList(value: unknown): string[] {
  if (value === undefined || value === null || value === "") return [];
  return (Array.isArray(value) ? value : [value]).map(String);
}

/**
 * An optional whole number typed in a text or number field: "" is null (e.g. "no limit"), digits
 * a number; anything else is passed on as typed, for the schema to refuse in words.
 */
export function asOptionalInteger(text: string): number | string | null {
  if (text === "") return null;
  return /^\d{1,9}$/.test(text) ? Number(text) : text;
}

/** A list typed in one field, items separated by commas (or lines): the non-empty items, or null when none. */
export function asLines(text: string): string[] | null {
  const items = text
    .split(/[\r\n,]+/)
    .map((item) => item.trim())
    .filter((item) => item !== "");
  return items.length === 0 ? null : items;
}

/** A form field as a string (the first, if repeated), trimmed. */
export function field(body: unknown, name: string): string {
  return rawField(body, name).trim();
}

/**
 * A form field exactly as sent (the first, if repeated): for a value the JSON routes validate
 * as it comes, such as a URL (validateWebhookUrl), so that the form accepts and refuses exactly
 * what the API does (trimming would drop a leading BOM the API refuses).
 */
export function rawField(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return typeof first === "string" ? first : "";
}

/** `<input type="datetime-local">` sends `2026-11-23T10:00` with no zone: the dashboard's times are UTC. */
const LOCAL_DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;
export function asUtc(value: string): string {
  return LOCAL_DATETIME.test(value) ? `${value.length === 16 ? `${value}:00` : value}Z` : value;
}

/**
 * The query's non-empty, single-valued strings (a repeated parameter keeps its first value),
 * with `since`/`until` read as UTC: what a filter form sent, ready for the routes' schemas.
 */
export function filterQuery(req: Request, names: readonly string[]): Record<string, string> {
  return filterFields(req.query, names);
}

/** The same from any source of fields (a posted form's body). */
export function filterFields(source: unknown, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = field(source, name);
    if (value !== "") out[name] = name === "since" || name === "until" ? asUtc(value) : value;
  }
  return out;
}

/** Parses `input` with `schema`: the data, or the problems in the routes' words. */
export function tryParse<S extends z.ZodType>(
  schema: S,
  input: unknown,
): { data: z.infer<S>; errors: null } | { data: null; errors: ErrorDetail[] } {
  const result = schema.safeParse(input);
  if (result.success) return { data: result.data, errors: null };
  return { data: null, errors: validationError(result.error).details ?? [] };
}

/** The problems of a validation error thrown by a service (e.g. a blocked address), or null for any other error. */
export function formErrors(error: unknown): ErrorDetail[] | null {
  if (isAppError(error, "validation_error")) return error.details ?? [{ path: "", message: refusalInWords(error) }];
  return null;
}

/** Problems keyed by field, for the templates: `{url: "must be an absolute https:// URL"}`. */
export function byField(errors: ErrorDetail[] | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of errors ?? []) out[e.path.split(".")[0] || "form"] ??= e.message;
  return out;
}
