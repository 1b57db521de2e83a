import { decideAfterAttempt, type AttemptOutcome } from "./retry-policy.js";

describe("decideAfterAttempt", () => {
  const spec = [10_000, 60_000, 300_000];
  const endedAt = new Date("2026-01-01T00:00:00Z");
  const delayAfter = (schedule: readonly number[], attempt: number, outcome: AttemptOutcome = "failed") => {
    const next = decideAfterAttempt(schedule, attempt, outcome, endedAt);
    return next.next === "retry" ? next.delayMs : next.next;
  };

  it("gives the spec's delays after the initial attempt, retry 1 and retry 2", () => {
    expect(delayAfter(spec, 0)).toBe(10_000);
    expect(delayAfter(spec, 1)).toBe(60_000);
    expect(delayAfter(spec, 2)).toBe(300_000);
  });

  it("stops after retry 3 failed", () => {
    expect(delayAfter(spec, 3)).toBe("failed");
    expect(delayAfter(spec, 4)).toBe("failed");
  });

  it("follows a configured schedule", () => {
    expect([0, 1, 2, 3].map((n) => delayAfter([200, 400, 600], n))).toEqual([200, 400, 600, "failed"]);
  });

  it("numbers the retry with the attempt numbers of the deliveries log and dates it from the failed attempt's end", () => {
    expect(decideAfterAttempt(spec, 0, "failed", endedAt)).toEqual({
      next: "retry",
      attempt: 1,
      delayMs: 10_000,
      at: new Date("2026-01-01T00:00:10Z"),
    });
  });

  it("delivers after a success, and fails an unretryable failure at once", () => {
    expect(delayAfter(spec, 0, "succeeded")).toBe("delivered");
    expect(delayAfter(spec, 3, "succeeded")).toBe("delivered");
    expect(delayAfter(spec, 0, "unretryable")).toBe("failed");
  });
});
