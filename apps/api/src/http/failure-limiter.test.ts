import { createFailureLimiter } from "./failure-limiter.js";

/** The in-memory counts (the admin listener's, and everyone's while Redis is away). */
describe("createFailureLimiter in memory", () => {
  it("limits an address past `limit` attempts; a success gives its place back", async () => {
    const limiter = createFailureLimiter({ keyPrefix: "t", limit: 2, windowMs: 60_000 });
    expect(await limiter.reserve("a")).toBe(0);
    await limiter.release("a");
    expect(await limiter.reserve("a")).toBe(0);
    expect(await limiter.reserve("a")).toBe(0);
    expect(await limiter.reserve("a")).toBeGreaterThan(0);
    expect(await limiter.reserve("b")).toBe(0);
  });

  it("a flood of new addresses does not reset the counts of an address that keeps trying", async () => {
    const now = 1_000_000 * 60_000 + 1_000;
    const limiter = createFailureLimiter({ keyPrefix: "t", limit: 3, windowMs: 60_000, now: () => now });
    for (let i = 0; i < 4; i++) await limiter.reserve("attacker");
    expect(await limiter.reserve("attacker")).toBeGreaterThan(0);
    // More new addresses than the map holds, the attacker trying again in between.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 60_000; i++) await limiter.reserve(`flood-${round}-${i}`);
      expect(await limiter.reserve("attacker")).toBeGreaterThan(0);
    }
  });

  it("keeps only the current and the previous window", async () => {
    let now = 1_000_000 * 60_000;
    const limiter = createFailureLimiter({ keyPrefix: "t", limit: 1, windowMs: 60_000, now: () => now });
    await limiter.reserve("a");
    expect(await limiter.reserve("a")).toBeGreaterThan(0);
    // Half-way through the next window, half of the previous one still counts (1 + 2 * 0.5 > 1).
    now = 1_000_001 * 60_000 + 30_000;
    expect(await limiter.reserve("a")).toBeGreaterThan(0);
    // Two windows later nothing of it is left.
    now = 1_000_003 * 60_000;
    expect(await limiter.reserve("a")).toBe(0);
  });
});
