import { retryDelayFor } from "./retry-policy.js";

describe("retryDelayFor", () => {
  const spec = [10_000, 60_000, 300_000];

  it("gives the spec's delays after the initial attempt, retry 1 and retry 2", () => {
    expect(retryDelayFor(spec, 1)).toBe(10_000);
    expect(retryDelayFor(spec, 2)).toBe(60_000);
    expect(retryDelayFor(spec, 3)).toBe(300_000);
  });

  it("stops after retry 3 failed", () => {
    expect(retryDelayFor(spec, 4)).toBe(-1);
    expect(retryDelayFor(spec, 5)).toBe(-1);
  });

  it("follows a configured schedule", () => {
    expect([1, 2, 3, 4].map((n) => retryDelayFor([200, 400, 600], n))).toEqual([200, 400, 600, -1]);
  });
});
