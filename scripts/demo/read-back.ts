import { setTimeout as delay } from "node:timers/promises";
import { isOperationalEventType } from "@mailhooks/events";
import { dataOf, listAll, type ApiClient, type Schemas } from "@mailhooks/api-client";

/** What the demo reads back from the API once its traffic is in (scripts/demo/main.ts), each wait bounded. */

/** The event `eventId` with its destinations (GET /v1/events/{event_id}). */
export async function getEvent(api: ApiClient, eventId: string): Promise<Schemas["EventDetail"]> {
  return dataOf(await api.GET("/v1/events/{event_id}", { params: { path: { event_id: eventId } } }));
}

/**
 * Reads with `read` every 200 ms until `done` holds of what it read or `timeoutMs` (ms) passed.
 * Returns the last reading and whether `done` held of it.
 */
async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<{ value: T; met: boolean }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return { value, met: true };
    if (Date.now() > deadline) return { value, met: false };
    await delay(200);
  }
}

/**
 * Waits until none of the events `eventIds` is pending (each delivered or failed, retries
 * included) and returns them in that order.
 * @throws Error when some are still pending after `timeoutMs` (ms)
 */
export async function waitForSettled(api: ApiClient, eventIds: string[], timeoutMs = 60_000): Promise<Schemas["EventDetail"][]> {
  const { value, met } = await poll(
    () => Promise.all(eventIds.map((id) => getEvent(api, id))),
    (details) => details.every((d) => d.status !== "pending"),
    timeoutMs,
  );
  if (!met) throw new Error(`events still pending after ${timeoutMs / 1000} s`);
  return value;
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
  const read = async () => {
    const listed = (await listAll(api, "/v1/events")).filter((e) => isOperationalEventType(e.event_type));
    return Promise.all(listed.map((e) => getEvent(api, e.event_id)));
  };
  return (await poll(read, (events) => done(events) && events.every((e) => e.status !== "pending"), timeoutMs)).value;
}

/**
 * Waits until the audit log holds `count` entries (one per replay, written once it ends).
 * @throws Error when it holds fewer after 30 s
 */
export async function waitForAudit(api: ApiClient, count: number): Promise<Schemas["AuditEntry"][]> {
  const { value, met } = await poll(
    () => listAll(api, "/v1/audit-log"),
    (entries) => entries.length >= count,
    30_000,
  );
  if (!met) throw new Error(`audit log has ${value.length} of ${count} entries after 30 s`);
  return value;
}
