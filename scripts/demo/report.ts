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
  /** How many webhooks the demo registered (each gets a test event). */
  webhooks: number;
  /** The webhook scoped to one inbox (docs/api.md, "Webhooks", `inbox_ids: [inboxId]`). */
  scoped: {
    webhookId: string;
    inboxId: string;
    /** GET /v1/deliveries?webhook_id=<webhookId>: every attempt made to it. */
    deliveries: Schemas["Delivery"][];
  };
  /** The webhook subscribed to the operational kinds (docs/api.md, "Operational events"), at `path` of the receiver. */
  operations: {
    webhookId: string;
    path: string;
    /** GET /v1/events/{id} of every operational event of the account. */
    events: Schemas["EventDetail"][];
  };
}

/** An operational envelope as the operations webhook received it (verified, answered 2xx). */
interface OperationalArrival {
  event: string;
  data: Record<string, unknown>;
}

/**
 * What the operations webhook received: the envelopes of its verified, accepted arrivals other
 * than test events; `missed` the failed events for which no `destination.failed` about them came.
 */
export function operationsReceipt(facts: Pick<DemoFacts, "arrivals" | "operations" | "failedBeforeReplay">) {
  const received: OperationalArrival[] = facts.arrivals
    .filter((a) => a.path === facts.operations.path && a.verified && a.status >= 200 && a.status < 300 && a.event !== "webhook.test")
    .map((a) => JSON.parse(a.body) as OperationalArrival);
  const failedNotices = received.filter((e) => e.event === "destination.failed");
  return {
    received,
    failedNotices,
    missed: facts.failedBeforeReplay.filter((id) => !failedNotices.some((e) => e.data.eventId === id)),
  };
}

/**
 * What the scoped webhook received, against what its inbox had: `received` are the events with a
 * 2xx attempt to it; `foreign` the events of another inbox it was sent at all (any attempt);
 * `missed` the events of its inbox it never received.
 */
export function scopedReceipt(events: Schemas["EventDetail"][], scoped: DemoFacts["scoped"]) {
  const byId = new Map(events.map((e) => [e.event_id, e]));
  const attempted = new Set(scoped.deliveries.flatMap((d) => (d.event_id ? [d.event_id] : [])));
  const receivedIds = new Set(
    scoped.deliveries.flatMap((d) =>
      d.event_id && d.response_status !== null && d.response_status >= 200 && d.response_status < 300 ? [d.event_id] : [],
    ),
  );
  // A destination is the API's own record that the event was meant for the webhook, attempted or not.
  for (const e of events) if (e.destinations.some((d) => d.webhook_id === scoped.webhookId)) attempted.add(e.event_id);
  const ofInbox = events.filter((e) => e.inbox_id === scoped.inboxId);
  return {
    received: ofInbox.filter((e) => receivedIds.has(e.event_id)),
    ofInbox,
    foreign: [...attempted].filter((id) => byId.get(id)?.inbox_id !== scoped.inboxId),
    missed: ofInbox.filter((e) => !receivedIds.has(e.event_id)).map((e) => e.event_id),
  };
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
  const scoped = scopedReceipt(events, facts.scoped);
  const operations = operationsReceipt(facts);

  // Every destination that ended delivered must have a verified arrival of that event's bytes.
  const missing: string[] = [];
  for (const event of [...events, ...facts.operations.events]) {
    for (const dest of event.destinations) {
      // The demo's webhooks are pushed to its receiver (a listen webhook's have no URL).
      if (dest.status !== "delivered" || dest.url === null) continue;
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
    [
      "its replay delivered it and wrote one audit entry with status 200",
      audit.length === 1 && audit[0].response_status === 200 && failed.every((e) => e.status === "delivered"),
    ],
    ["no event is left pending or failed", events.every((e) => e.status === "delivered")],
    ["a test event reached each webhook", (byTrigger.test ?? 0) >= facts.webhooks],
    ["the deliveries log has one row per arrival", deliveries.filter((d) => d.response_status !== null).length === arrivals.length],
    [
      `the scoped webhook received every event of ${facts.scoped.inboxId} and none of another inbox`,
      scoped.foreign.length === 0 && scoped.missed.length === 0 && scoped.ofInbox.length > 0,
    ],
    [
      "the operations webhook received destination.failed for the failed event",
      failedBeforeReplay.length > 0 && operations.missed.length === 0,
    ],
  ];

  console.log("\n=== demo report (read back from the API) ===");
  console.log(`events:                ${events.length} (${fmt(countBy(events, (e) => e.event_type))})`);
  console.log(`event status:          ${fmt(countBy(events, (e) => e.status))} (after the replay)`);
  console.log(`deliveries by trigger: ${fmt(byTrigger)}`);
  console.log(
    `failed events:         ${failed.map((e) => `${e.event_id} (${e.event_type}), ${e.status} after replay`).join(", ") || "none"}`,
  );
  console.log(
    `audit entries:         ${audit.length} (${audit.map((a) => `${a.event_id} -> ${a.destination_url}: ${a.response_status ?? a.error}`).join(", ")})`,
  );
  console.log(`signatures verified:   ${verified}/${arrivals.length} at the receiver`);
  console.log(
    `scoped webhook:        inbox ${facts.scoped.inboxId} only: ${scoped.received.length} of ${events.length} events (${fmt(countBy(scoped.received, (e) => e.event_type))})`,
  );
  console.log(
    `operational events:    ${fmt(countBy(operations.received, (e) => e.event))} at ${facts.operations.path}${operations.failedNotices
      .map(
        (e) =>
          `; destination.failed about ${String(e.data.eventId)}: ${String(e.data.attempts)} attempts, last ${String(e.data.lastStatus ?? e.data.lastError)}`,
      )
      .join("")}`,
  );
  for (const line of missing) console.log(`missing delivery:      ${line}`);
  for (const id of operations.missed) console.log(`no destination.failed: ${id}`);
  for (const id of scoped.foreign)
    console.log(`scoped webhook got:    ${id} of ${events.find((e) => e.event_id === id)?.inbox_id ?? "an unknown event"}`);
  for (const id of scoped.missed) console.log(`scoped webhook missed: ${id}`);
  for (const [name, ok] of checks) console.log(`${ok ? "ok  " : "FAIL"}  ${name}`);
  const passed = checks.every(([, ok]) => ok);
  console.log(passed ? "demo: OK" : "demo: FAILED");
  return passed;
}
