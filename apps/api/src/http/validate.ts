import type { z } from "zod";
import { validationError } from "../errors.js";

/**
 * PostgreSQL text cannot hold U+0000: a string that reaches a column or a query parameter
 * refuses it up front (422 naming the field) instead of failing in the database (500).
 */
export const hasNoNul = (value: string) => !value.includes("\u0000");
export const NO_NUL_MESSAGE = "must not contain the NUL character";

/** Parses `input` with `schema` or throws a 422 naming each offending field under `prefix`. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, prefix?: string): z.infer<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw validationError(result.error, prefix);
  return result.data;
}
