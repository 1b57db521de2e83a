import { v7 as uuidv7 } from "uuid";

/**
 * Resource identifiers: a type prefix and a UUIDv7 without dashes, e.g.
 * `evt_019a2b3c4d5e7f00a1b2c3d4e5f60718`. UUIDv7 starts with the time the id was made, in ms,
 * so ids of one writer sort by creation. Rows of concurrent writers (and rows whose id is made
 * before they are written, such as a test delivery's) may not: lists therefore page by
 * (`created_at`, id), with the id only breaking ties.
 */
export type IdPrefix = "acct" | "key" | "wh" | "evt" | "dst" | "dlv" | "rpl" | "aud" | "tst" | "ses";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${uuidv7().replaceAll("-", "")}`;
}
