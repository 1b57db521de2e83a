import type { z } from "zod";
import { validationError } from "../errors.js";

/** Parses `input` with `schema` or throws a 422 naming each offending field under `prefix`. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, prefix?: string): z.infer<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw validationError(result.error, prefix);
  return result.data;
}
