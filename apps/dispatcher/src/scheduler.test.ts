import { jest } from "@jest/globals";
import { LATE_LEASE_RELEASE_MS } from "@mailhooks/delivery-state";
import { createLateReleases } from "./scheduler.js";

/** The second look for leases not there when their work ended (packages/delivery-state/src/leases.ts). */
describe("late lease releases", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test("each work id is released once, no sooner than LATE_LEASE_RELEASE_MS after it was added, with the others due by then", async () => {
    const released: string[][] = [];
    const late = createLateReleases(async (ids) => void released.push(ids));
    late.add("a");
    jest.advanceTimersByTime(LATE_LEASE_RELEASE_MS / 2);
    late.add("b");
    late.add("c");
    jest.advanceTimersByTime(LATE_LEASE_RELEASE_MS / 2 - 1);
    expect(released).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(released).toEqual([["a"]]);
    jest.advanceTimersByTime(LATE_LEASE_RELEASE_MS / 2);
    expect(released).toEqual([["a"], ["b", "c"]]);
    jest.advanceTimersByTime(10 * LATE_LEASE_RELEASE_MS);
    expect(released).toHaveLength(2);
    late.stop();
  });

  test("at most 10,000 wait; stop forgets them", () => {
    const released: string[][] = [];
    const late = createLateReleases(async (ids) => void released.push(ids));
    for (let i = 0; i < 10_005; i++) late.add(`w${i}`);
    jest.advanceTimersByTime(LATE_LEASE_RELEASE_MS);
    expect(released.flat()).toHaveLength(10_000);
    late.add("x");
    late.stop();
    jest.advanceTimersByTime(LATE_LEASE_RELEASE_MS);
    expect(released.flat()).toHaveLength(10_000);
  });
});
