import { z } from "zod";

/**
 * Keyset pagination of the lists (docs/api.md, "Conventions"): `limit` 1..100 (default 50),
 * `cursor` opaque, newest first. Rows are ordered by (time desc, id desc) and the cursor is the
 * last returned row's pair, so rows created meanwhile (which sort first) never shift a page:
 * nothing is skipped or repeated.
 */

export interface Cursor {
  at: Date;
  id: string;
}

const LIMIT_MESSAGE = "must be an integer from 1 to 100";

export const paginationShape = {
  // Decimal digits only: Number() would also take `0x10`, `1e2`, `+5` or ` 7`.
  limit: z
    .preprocess(
      (value) => (typeof value === "string" && !/^[0-9]{1,10}$/.test(value) ? Number.NaN : value),
      z.coerce.number({ message: LIMIT_MESSAGE }).int(LIMIT_MESSAGE).min(1, LIMIT_MESSAGE).max(100, LIMIT_MESSAGE).default(50),
    )
    .meta({ description: "items per page, 1 to 100" }),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, "is not a valid cursor")
    .transform((value, ctx): Cursor => {
      const match = /^(\d{1,15})\.([a-z]+_[0-9a-f]{32})$/.exec(Buffer.from(value, "base64url").toString("utf8"));
      if (!match) {
        ctx.addIssue({ code: "custom", message: "is not a valid cursor" });
        return z.NEVER;
      }
      return { at: new Date(Number(match[1])), id: match[2] };
    })
    .optional()
    .meta({ description: "the `next_cursor` of the previous page" }),
};

export function encodeCursor(at: Date, id: string): string {
  return Buffer.from(`${at.getTime()}.${id}`, "utf8").toString("base64url");
}

/**
 * Prisma `where` fragment for the rows after `cursor` in (field desc, id desc) order. The
 * redundant `field <= at` is what PostgreSQL can use as an index bound (it cannot from the OR
 * alone), so a deep page starts where the cursor is instead of scanning from the top.
 */
function afterCursor(field: string, cursor: Cursor | undefined): Record<string, unknown> {
  if (!cursor) return {};
  return {
    AND: [{ [field]: { lte: cursor.at } }, { OR: [{ [field]: { lt: cursor.at } }, { [field]: cursor.at, id: { lt: cursor.id } }] }],
  };
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** What a list asks for: `limit` rows at most, after `cursor` (the previous page's end) if any. */
export interface PageRequest {
  limit: number;
  cursor?: Cursor;
}

/** The Prisma `findMany` arguments of one page (see keysetPage). */
export interface PageQuery {
  where: Record<string, unknown>;
  orderBy: Record<string, "desc">[];
  take: number;
}

/**
 * One page of a list ordered by (`field` desc, id desc), `field` being a Date column of the rows
 * (e.g. createdAt). `findMany` runs the query it is given: `where` (the caller's filters and the
 * rows after the cursor), that order, and `take: limit + 1`, the extra row only telling whether
 * there is a next page, whose cursor is the last row's (`field`, id). `map` turns a row into
 * what the page lists.
 */
export async function keysetPage<F extends string, R extends { id: string } & Record<F, Date>, T>(
  field: F,
  page: PageRequest,
  where: Record<string, unknown>,
  findMany: (query: PageQuery) => Promise<R[]>,
  map: (row: R) => T,
): Promise<Page<T>> {
  const rows = await findMany({
    where: { ...where, ...afterCursor(field, page.cursor) },
    orderBy: [{ [field]: "desc" }, { id: "desc" }],
    take: page.limit + 1,
  });
  const hasMore = rows.length > page.limit;
  const pageRows = hasMore ? rows.slice(0, page.limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return { data: pageRows.map(map), next_cursor: hasMore && last ? encodeCursor(last[field], last.id) : null };
}

/**
 * An ISO 8601 timestamp (any offset) of the years 0001 to 9999: what PostgreSQL and the
 * driver can both represent (year 0000 parses in JavaScript but PostgreSQL has no year 0).
 */
export const isoTimestamp = z.iso.datetime({ offset: true, message: "must be an ISO 8601 timestamp" }).refine((value) => {
  const year = new Date(value).getUTCFullYear();
  return year >= 1 && year <= 9999;
}, "must be a time of the years 0001 to 9999");

/** Optional ISO 8601 bounds of a list: `since` inclusive, `until` exclusive. */
export const timeWindowShape = {
  since: isoTimestamp
    .transform((v) => new Date(v))
    .optional()
    .meta({ description: "ISO 8601 time, inclusive lower bound" }),
  until: isoTimestamp
    .transform((v) => new Date(v))
    .optional()
    .meta({ description: "ISO 8601 time, exclusive upper bound" }),
};

/** Prisma `where` fragment for [since, until) on `field`. */
export function withinWindow(field: string, window: { since?: Date; until?: Date }) {
  if (!window.since && !window.until) return {};
  return { [field]: { ...(window.since ? { gte: window.since } : {}), ...(window.until ? { lt: window.until } : {}) } };
}
