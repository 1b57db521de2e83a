import type { AuditEntry } from "@mailhooks/db";
import type { ApiDeps } from "../deps.js";
import { keysetPage, withinWindow, type Cursor, type Page } from "../http/pagination.js";
import type { AuditEntryView } from "../schemas/audit.js";

/**
 * The audit log (spec "Audit log entry"; docs/api.md, "Audit log"): who replayed what, when, to
 * where, and what the receiver answered. Read-only here: entries are written by the dispatcher
 * and a database trigger refuses any UPDATE or DELETE.
 */

export type { AuditEntryView };

export interface AuditFilter {
  event_id?: string;
  since?: Date;
  until?: Date;
  limit: number;
  cursor?: Cursor;
}

/** Entries of the account, newest `replayed_at` first; `since`/`until` bound `replayed_at`. */
export async function listAuditEntries(deps: ApiDeps, accountId: string, filter: AuditFilter): Promise<Page<AuditEntryView>> {
  const where = {
    accountId,
    ...(filter.event_id !== undefined ? { eventId: filter.event_id } : {}),
    ...withinWindow("replayedAt", filter),
  };
  return keysetPage("replayedAt", filter, where, (query) => deps.prisma.auditEntry.findMany(query), toView);
}

const toView = (r: AuditEntry): AuditEntryView => ({
  id: r.id,
  event_id: r.eventId,
  replayed_at: r.replayedAt.toISOString(),
  destination_url: r.destinationUrl,
  response_status: r.responseStatus,
  error: r.error,
  api_key_id: r.apiKeyId,
});
