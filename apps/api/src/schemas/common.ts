import { z } from "zod";

/**
 * Building blocks of the API's JSON answers (docs/api.md, "Conventions"): ISO 8601 UTC timestamps,
 * prefixed ids and the `{data, next_cursor}` page of every list. Everything in this folder is a
 * zod schema: the services' return types are inferred from them and the OpenAPI document
 * (GET /openapi.json) is generated from them, so the two cannot drift apart.
 */

/** A time as `Date.toISOString()` writes it, e.g. `2026-11-22T10:00:00.000Z`. */
export const timestamp = z.iso
  .datetime({ offset: false })
  .meta({ id: "Timestamp", description: "ISO 8601 UTC timestamp", example: "2026-11-22T10:00:00.000Z" });

/** An id of `prefix` followed by a UUIDv7 in lowercase hex without dashes (it sorts by creation). */
export const prefixedId = (prefix: string, description: string) =>
  z
    .string()
    .regex(new RegExp(`^${prefix}_[0-9a-f]{32}$`))
    .meta({ description, example: `${prefix}_019a2b3c4d5e7f00a1b2c3d4e5f60718` });

/** `{data: [...], next_cursor}`, newest first; `next_cursor` is null on the last page. */
export function pageOf<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      data: z.array(item),
      next_cursor: z.string().nullable().meta({ description: "pass as `cursor` to read the next page; null on the last page" }),
    })
    .meta({ id });
}
