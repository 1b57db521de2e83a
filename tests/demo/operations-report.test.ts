import { jest } from "@jest/globals";
import type { Arrival } from "@mailhooks/receiver";
import { operationsReceipt, printReport, type DemoFacts } from "../../scripts/demo/report.js";

/**
 * The demo report's operational-events line and check (docs/api.md, "Operational events"): the
 * webhook subscribed to the operational kinds must have received `destination.failed` about the
 * demo's failed event; the report says what it received and fails otherwise. The demo run itself
 * only ever shows the passing case.
 */

const PATH = "/hooks/operations";
const FAILED = "evt_failed";
const CHECK = "the operations webhook received destination.failed for the failed event";

function arrival(body: Record<string, unknown>, overrides: Partial<Arrival> = {}): Arrival {
  return {
    path: PATH,
    body: JSON.stringify(body),
    timestamp: "1795341600",
    signature: "sha256=00",
    verified: true,
    event: body.event as string,
    duplicate: false,
    status: 200,
    receivedAt: 0,
    headers: {},
    ...overrides,
  };
}

const failedNotice = (eventId: string) => ({
  event: "destination.failed",
  timestamp: 1795341600,
  data: {
    eventId,
    eventType: "message.clicked",
    webhookId: "wh_archive",
    url: "https://localhost/hooks/archive",
    attempts: 4,
    lastStatus: 503,
    lastError: null,
  },
});

function facts(arrivals: Arrival[]): DemoFacts {
  return {
    events: [],
    failedBeforeReplay: [FAILED],
    audit: [],
    deliveries: [],
    arrivals,
    webhooks: 4,
    scoped: { webhookId: "wh_scoped", inboxId: "support@inbox.example.net", deliveries: [] },
    operations: { webhookId: "wh_operations", path: PATH, events: [] },
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

test("destination.failed about the failed event passes the check, and the report says what the webhook received", () => {
  const test = arrival({ event: "webhook.test", timestamp: 1795341600, data: { webhookId: "wh_operations", url: "https://x" } });
  const f = facts([test, arrival(failedNotice(FAILED))]);
  expect(operationsReceipt(f)).toMatchObject({ missed: [] });
  const { lines } = report(f);
  expect(lines).toContain(
    `operational events:    destination.failed 1 at ${PATH}; destination.failed about ${FAILED}: 4 attempts, last 503`,
  );
  expect(lines).toContain(`ok    ${CHECK}`);
});

test("no destination.failed, or one about another event, fails the demo", () => {
  for (const arrivals of [[], [arrival(failedNotice("evt_other"))]]) {
    const { passed, lines } = report(facts(arrivals));
    expect(passed).toBe(false);
    expect(lines).toContain(`FAIL  ${CHECK}`);
    expect(lines).toContain(`no destination.failed: ${FAILED}`);
  }
});

test("an arrival that did not verify, or was refused, does not count", () => {
  for (const overrides of [{ verified: false }, { status: 401 }]) {
    const { passed, lines } = report(facts([arrival(failedNotice(FAILED), overrides)]));
    expect(passed).toBe(false);
    expect(lines).toContain(`FAIL  ${CHECK}`);
  }
});

test("with no failed event there is nothing to be told about: the check fails rather than pass vacuously", () => {
  const f = facts([]);
  f.failedBeforeReplay = [];
  expect(report(f).lines).toContain(`FAIL  ${CHECK}`);
});
