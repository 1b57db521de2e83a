import { v7 as uuidv7 } from "uuid";

/**
 * Resource identifiers: a type prefix and a UUIDv7 without dashes, e.g.
 * `evt_019a2b3c4d5e7f00a1b2c3d4e5f60718`. UUIDv7 starts with the creation time in ms, so ids
 * sort by creation: the lists' keyset cursors rely on it.
 */
export type IdPrefix = "acct" | "key" | "wh" | "evt" | "dst" | "dlv" | "rpl" | "aud" | "tst" | "ses";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${uuidv7().replaceAll("-", "")}`;
}
