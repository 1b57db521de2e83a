import { afterEach, beforeEach, expect, jest, test } from "@jest/globals";
import { createStartPacer, createWakePacer, holdDelayMs, SLOW_HOLD_MS } from "./holds.js";

/**
 * The held jobs' timing (holds.ts), on jest's clock: a slow webhook's hold is jittered, and wakes
 * are paced, so that a wave of ended attempts does not start again as one wave.
 */
beforeEach(() => void jest.useFakeTimers({ now: 1_000_000 }));
afterEach(() => void jest.useRealTimers());

test("a slow webhook's hold is SLOW_HOLD_MS give or take half, others 50 ms doubling to 400 ms", () => {
  expect(holdDelayMs(0, true, () => 0)).toBe(SLOW_HOLD_MS / 2);
  expect(holdDelayMs(0, true, () => 0.999_999)).toBe(Math.round(SLOW_HOLD_MS * 1.5));
  expect([0, 1, 2, 3, 9].map((holds) => holdDelayMs(holds))).toEqual([50, 100, 200, 400, 400]);
});

test("wakes: the first at once, the rest one interval apart, at most maxQueued waiting", async () => {
  const promoted: [string, number][] = [];
  const pacer = createWakePacer({ intervalMs: 20, maxQueued: 3, promote: async (jobId) => void promoted.push([jobId, Date.now()]) });
  await pacer.wake(["a", "b"]);
  await pacer.wake(["c", "d", "e"]);
  // "a" went at once; "b", "c", "d" wait; "e" found the queue full (it comes back at its hold's end).
  expect(promoted).toEqual([["a", 1_000_000]]);
  expect(pacer.queued).toBe(3);
  await jest.advanceTimersByTimeAsync(100);
  expect(promoted).toEqual([
    ["a", 1_000_000],
    ["b", 1_000_020],
    ["c", 1_000_040],
    ["d", 1_000_060],
  ]);
  expect(pacer.queued).toBe(0);
  // Idle for longer than the interval: the next wake goes at once again.
  await pacer.wake(["f"]);
  expect(promoted.at(-1)).toEqual(["f", 1_000_100]);
});

test("a failed promotion is ignored and does not stop the ones after it", async () => {
  const promoted: string[] = [];
  const pacer = createWakePacer({
    intervalMs: 5,
    maxQueued: 10,
    promote: async (jobId) => {
      if (jobId === "gone") throw new Error("job is not delayed");
      promoted.push(jobId);
    },
  });
  await pacer.wake(["gone", "x", "y"]);
  await jest.advanceTimersByTimeAsync(20);
  expect(promoted).toEqual(["x", "y"]);
});

test("slow starts: the first at once, the next one interval after the last turn given, at once again after an idle interval", () => {
  const starts = createStartPacer(16);
  expect([1_000, 1_000, 1_000, 1_010].map((now) => starts.turn(now))).toEqual([1_000, 1_016, 1_032, 1_048]);
  expect(starts.turn(2_000)).toBe(2_000);
  expect(starts.turn(2_020)).toBe(2_020);
});
