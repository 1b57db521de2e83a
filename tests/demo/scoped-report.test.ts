import { jest } from "@jest/globals";
import type { Schemas } from "@mailhooks/api-client";
import { printReport, scopedReceipt, type DemoFacts } from "../../scripts/demo/report.js";

/**
 * The demo report's scoped-webhook line and check (issue 20, item 5): the webhook scoped to one
 * inbox must have received every event of that inbox and none of another; the report says which
 * it received and fails otherwise. The demo run itself only ever shows the passing case.
 */

const SCOPED = "wh_scoped";
const OTHER = "wh_all";
const INBOX = "support@inbox.example.net";

function event(id: string, inboxId: string, type: Schemas["EventDetail"]["event_type"], webhookIds: string[]): Schemas["EventDetail"] {
  return {
    event_id: id,
    event_type: type,
    inbox_id: inboxId,
    status: "delivered",
    payload: null,
    destinations: webhookIds.map((webhook_id) => ({ webhook_id, url: `https://localhost/hooks/${webhook_id}`, status: "delivered" })),
  } as unknown as Schemas["EventDetail"];
}

function delivery(eventId: string | null, webhookId: string, status: number | null): Schemas["Delivery"] {
  return {
    id: `dlv_${eventId}_${webhookId}`,
    event_id: eventId,
    webhook_id: webhookId,
    url: "https://localhost/",
    trigger: "initial",
    attempt: 0,
    response_status: status,
    error: null,
    response_body: null,
    duration_ms: 1,
    created_at: "2026-11-26T00:00:00Z",
  };
}

const events = [
  event("evt_1", INBOX, "message.received", [OTHER, SCOPED]),
  event("evt_2", "sales@inbox.example.net", "message.received", [OTHER]),
  event("evt_3", INBOX, "message.sent", [OTHER, SCOPED]),
];

function facts(scopedDeliveries: Schemas["Delivery"][]): DemoFacts {
  return {
    events,
    failedBeforeReplay: [],
    audit: [],
    deliveries: [],
    arrivals: [],
    webhooks: 2,
    scoped: { webhookId: SCOPED, inboxId: INBOX, deliveries: scopedDeliveries },
    operations: { webhookId: "wh_operations", path: "/hooks/operations", events: [] },
  };
}

/** printReport's lines and result, its console output captured. */
function report(f: DemoFacts): { passed: boolean; lines: string[] } {
  const lines: string[] = [];
  const spy = jest.spyOn(console, "log").mockImplementation((line?: unknown) => void lines.push(String(line)));
  try {
    return { passed: printReport(f), lines };
  } finally {
    spy.mockRestore();
  }
}

const CHECK = `the scoped webhook received every event of ${INBOX} and none of another inbox`;

test("a scoped webhook that received exactly its inbox's events passes, and the report says which", () => {
  const f = facts([
    delivery(null, SCOPED, 200),
    delivery("evt_1", SCOPED, 500),
    delivery("evt_1", SCOPED, 200),
    delivery("evt_3", SCOPED, 200),
  ]);
  expect(scopedReceipt(f.events, f.scoped)).toMatchObject({ foreign: [], missed: [] });
  const { lines } = report(f);
  expect(lines).toContain(`scoped webhook:        inbox ${INBOX} only: 2 of 3 events (message.received 1, message.sent 1)`);
  expect(lines).toContain(`ok    ${CHECK}`);
});

test("an event of another inbox sent to the scoped webhook fails the demo", () => {
  const { passed, lines } = report(facts([delivery("evt_1", SCOPED, 200), delivery("evt_2", SCOPED, 200), delivery("evt_3", SCOPED, 200)]));
  expect(passed).toBe(false);
  expect(lines).toContain(`FAIL  ${CHECK}`);
  expect(lines).toContain("scoped webhook got:    evt_2 of sales@inbox.example.net");
});

test("a destination of the scoped webhook on another inbox's event fails the demo even without an attempt", () => {
  const f = facts([delivery("evt_1", SCOPED, 200), delivery("evt_3", SCOPED, 200)]);
  f.events = [events[0], event("evt_2", "sales@inbox.example.net", "message.received", [OTHER, SCOPED]), events[2]];
  const { passed, lines } = report(f);
  expect(passed).toBe(false);
  expect(lines).toContain(`FAIL  ${CHECK}`);
});

test("an event of its inbox the scoped webhook never received (no 2xx) fails the demo", () => {
  const { passed, lines } = report(facts([delivery("evt_1", SCOPED, 200), delivery("evt_3", SCOPED, 503)]));
  expect(passed).toBe(false);
  expect(lines).toContain(`FAIL  ${CHECK}`);
  expect(lines).toContain("scoped webhook missed: evt_3");
});
