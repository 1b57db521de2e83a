import { isOperationalEventType } from "@mailhooks/events";
import { dataOf, listAll, type ApiClient, type Schemas } from "@mailhooks/api-client";

/** What the demo reads back from the API once its traffic is in (scripts/demo/main.ts), each wait bounded. */

/** The event `eventId` with its destinations (GET /v1/events/{event_id}). */
export async function getEvent(api: ApiClient, eventId: string): Promise<Schemas["EventDetail"]> {
  return dataOf(await api.GET("/v1/events/{event_id}", { params: { path: { event_id: eventId } } }));
}

/**
 * Waits until none of the events `eventIds` is pending (each delivered or failed, retries
 * included) and returns them in that order.
 * @throws Error when some are still pending after `timeoutMs` (ms)
 */
export async function waitForSettled(api: ApiClient, eventIds: string[], timeoutMs = 60_000): Promise<Schemas["EventDetail"][]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const details = await Promise.all(eventIds.map((id) => getEvent(api, id)));
    if (details.every((d) => d.status !== "pending")) return details;
    if (Date.now() > deadline) throw new Error(`events still pending after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Waits until `done` holds for the account's operational events (docs/api.md, "Operational
 * events"), read from GET /v1/events, and returns them with their details; after `timeoutMs` (ms)
 * returns what there is, for the report's check to judge.
 */
export async function waitForOperational(
  api: ApiClient,
  done: (events: Schemas["EventDetail"][]) => boolean,
  timeoutMs: number,
): Promise<Schemas["EventDetail"][]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const listed = (await listAll(api, "/v1/events")).filter((e) => isOperationalEventType(e.event_type));
    const events = await Promise.all(listed.map((e) => getEvent(api, e.event_id)));
    if ((done(events) && events.every((e) => e.status !== "pending")) || Date.now() > deadline) return events;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Waits until the audit log holds `count` entries (one per replay, written once it ends). */
export async function waitForAudit(api: ApiClient, count: number): Promise<Schemas["AuditEntry"][]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const entries = await listAll(api, "/v1/audit-log");
    if (entries.length >= count) return entries;
    if (Date.now() > deadline) throw new Error(`audit log has ${entries.length} of ${count} entries after 30 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
