import { expect, test } from "@jest/globals";
import { createShareLedger, reserveSlots } from "./shares.js";

/**
 * The share rule's reserve (shares.ts, docs/scheduler.md "The reserve is for newcomers"), on a
 * dispatcher of C = 16 slots and R = 2 reserve slots, with time given by the test.
 */
const C = 16;
const SLOW_MS = 500;

function fill(ledger: ReturnType<typeof createShareLedger>, accountId: string, count: number, at: number): void {
  for (let i = 0; i < count; i++) {
    const webhookId = `${accountId}-hang-${i}`;
    expect(ledger.hasShare(webhookId, accountId, false)).toBe(true);
    ledger.start(`${webhookId}-job`, webhookId, accountId, at);
  }
}

test("an account's reserve share counts its reserve attempts of any age: new webhooks that all hang hold one share, another account finds the rest", () => {
  expect(reserveSlots(C)).toBe(2);
  const ledger = createShareLedger({ capacity: C, slowAttemptMs: SLOW_MS });
  // One account's 16 new webhooks take the C slots, each with its first attempt.
  fill(ledger, "acct_a", C, 0);
  // Long after (the attempts hang), another new webhook of it takes its share of the reserve...
  const later = 10 * SLOW_MS;
  expect(ledger.hasShare("acct_a-hang-16", "acct_a", false)).toBe(true);
  ledger.start("acct_a-hang-16-job", "acct_a-hang-16", "acct_a", later);
  // ...and no more: the next of its new webhooks is refused, however old its hanging attempts are.
  expect(ledger.hasShare("acct_a-hang-17", "acct_a", false)).toBe(false);
  // Another account's newcomer finds the rest of the reserve.
  expect(ledger.hasShare("wh_b", "acct_b", false)).toBe(true);
  ledger.start("wh_b-job", "wh_b", "acct_b", later);
  expect(ledger.running).toBe(C + 2);
  expect(ledger.hasShare("wh_c", "acct_c", false)).toBe(false);
  // The reserve attempt that ends gives its account's share back.
  ledger.forget("acct_a-hang-16-job");
  expect(ledger.hasShare("acct_a-hang-17", "acct_a", false)).toBe(true);
});

test("the reserve is a newcomer's: a webhook running its newcomer share is refused it; a slow webhook never gets it", () => {
  const ledger = createShareLedger({ capacity: C, slowAttemptMs: SLOW_MS });
  for (let i = 0; i < C; i++) ledger.start(`a${i}`, "wh_a", "acct_a", 0);
  expect(ledger.hasShare("wh_a", "acct_a", false)).toBe(false);
  expect(ledger.hasShare("wh_slow", "acct_b", true)).toBe(false);
  // The same account's other webhook is a newcomer: the account holds none of the reserve.
  expect(ledger.hasShare("wh_a2", "acct_a", false)).toBe(true);
  // Below C, any webhook takes a slot (work-conserving), a slow one within its fair share.
  ledger.forget("a0");
  expect(ledger.hasShare("wh_a", "acct_a", false)).toBe(true);
  expect(ledger.hasShare("wh_slow", "acct_b", true)).toBe(true);
});
