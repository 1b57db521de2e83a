import type { Schemas } from "@mailhooks/api-client";
import type { Arrival } from "@mailhooks/receiver";

/** The demo's closing report, read back from the API, and its pass/fail checks. */
export interface DemoFacts {
  /** GET /v1/events/{id} of every event the demo created, after the replays. */
  events: Schemas["EventDetail"][];
  /** Events that had failed before the demo replayed them. */
  failedBeforeReplay: string[];
  /** GET /v1/audit-log. */
  audit: Schemas["AuditEntry"][];
  /** Every row of GET /v1/deliveries for the demo's account. */
  deliveries: Schemas["Delivery"][];
  arrivals: Arrival[];
}

const countBy = <T>(items: T[], key: (item: T) => string) =>
  items.reduce<Record<string, number>>((acc, item) => ((acc[key(item)] = (acc[key(item)] ?? 0) + 1), acc), {});

const fmt = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ") || "none";

/** Prints the report; returns true when every check passed. */
export function printReport(facts: DemoFacts): boolean {
  const { events, deliveries, arrivals, audit, failedBeforeReplay } = facts;
  const failed = events.filter((e) => failedBeforeReplay.includes(e.event_id));
  const verified = arrivals.filter((a) => a.verified).length;
  const byTrigger = countBy(deliveries, (d) => d.trigger);

  // Every destination that ended delivered must have a verified arrival of that event's bytes.
  const missing: string[] = [];
  for (const event of events) {
    for (const dest of event.destinations) {
      if (dest.status !== "delivered") continue;
      const body = JSON.stringify(event.payload);
      const path = new URL(dest.url).pathname;
      if (!arrivals.some((a) => a.verified && a.path === path && a.body === body && a.status >= 200 && a.status < 300)) {
        missing.push(`${event.event_id} -> ${dest.url}`);
      }
    }
  }
  const checks: [string, boolean][] = [
    ["every signature verified at the receiver", verified === arrivals.length && arrivals.length > 0],
    ["every delivered destination was received with the stored bytes", missing.length === 0],
    ["retries happened", (byTrigger.retry ?? 0) > 0],
    ["exactly one event failed (its endpoint was down)", failed.length === 1],
    ["its replay delivered it and wrote one audit entry with status 200", audit.length === 1 && audit[0].response_status === 200 && failed.every((e) => e.status === "delivered")],
    ["no event is left pending or failed", events.every((e) => e.status === "delivered")],
    ["a test event reached each webhook", (byTrigger.test ?? 0) >= 2],
    ["the deliveries log has one row per arrival", deliveries.filter((d) => d.response_status !== null).length === arrivals.length],
  ];

  console.log("\n=== demo report (read back from the API) ===");
  console.log(`events:                ${events.length} (${fmt(countBy(events, (e) => e.event_type))})`);
  console.log(`event status:          ${fmt(countBy(events, (e) => e.status))} (after the replay)`);
  console.log(`deliveries by trigger: ${fmt(byTrigger)}`);
  console.log(`failed events:         ${failed.map((e) => `${e.event_id} (${e.event_type}), ${e.status} after replay`).join(", ") || "none"}`);
  console.log(`audit entries:         ${audit.length} (${audit.map((a) => `${a.event_id} -> ${a.destination_url}: ${a.response_status ?? a.error}`).join(", ")})`);
  console.log(`signatures verified:   ${verified}/${arrivals.length} at the receiver`);
  for (const line of missing) console.log(`missing delivery:      ${line}`);
  for (const [name, ok] of checks) console.log(`${ok ? "ok  " : "FAIL"}  ${name}`);
  const passed = checks.every(([, ok]) => ok);
  console.log(passed ? "demo: OK" : "demo: FAILED");
  return passed;
}
