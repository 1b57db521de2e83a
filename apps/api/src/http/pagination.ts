import { z } from "zod";

/**
 * Keyset pagination of the lists (CONTRACT.md section 3): `limit` 1..100 (default 50),
 * `cursor` opaque, newest first. The cursor is the last returned id (ids sort by creation time),
 * so items created meanwhile never shift a page: nothing is skipped or repeated.
 */
export const paginationShape = {
  limit: z.coerce.number({ message: "must be an integer from 1 to 100" }).int("must be an integer from 1 to 100").min(1, "must be an integer from 1 to 100").max(100, "must be an integer from 1 to 100").default(50),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, "is not a valid cursor")
    .transform((c, ctx) => {
      const decoded = Buffer.from(c, "base64url").toString("utf8");
      if (!/^[a-z]+_[0-9a-f]{32}$/.test(decoded)) {
        ctx.addIssue({ code: "custom", message: "is not a valid cursor" });
        return z.NEVER;
      }
      return decoded;
    })
    .optional(),
};

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/**
 * Builds a page from `rows` fetched with `take: limit + 1`: the extra row only tells whether
 * there is a next page.
 */
export function toPage<R extends { id: string }, T>(rows: R[], limit: number, map: (row: R) => T): Page<T> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    data: pageRows.map(map),
    next_cursor: hasMore && last ? Buffer.from(last.id, "utf8").toString("base64url") : null,
  };
}
