import { startReceiver, testCertificate } from "@mailhooks/receiver";
import { TIMED_OUT, waitUntil, WaitTimeout } from "../support/wait.js";

/**
 * The tests' waits end in a time-out that an absence check can tell from any other error
 * (tests/support/wait.ts): `rejects.toThrow(TIMED_OUT)` passes on the time-out only.
 */
test("waitUntil returns the accepted value, or throws a WaitTimeout matching TIMED_OUT", async () => {
  let n = 0;
  expect(
    await waitUntil(
      () => ++n,
      (value) => value >= 3,
      1_000,
      1,
    ),
  ).toBe(3);
  const timedOut = waitUntil(
    () => 0,
    (value) => value > 0,
    30,
    5,
  );
  await expect(timedOut).rejects.toBeInstanceOf(WaitTimeout);
  await expect(
    waitUntil(
      () => 0,
      (value) => value > 0,
      30,
      5,
    ),
  ).rejects.toThrow(TIMED_OUT);
});

test("an error of the condition itself is not the time-out, for waitUntil and for a receiver's waitFor", async () => {
  const broken = () => {
    throw new TypeError("Cannot read properties of undefined");
  };
  await expect(waitUntil(() => 1, broken, 30, 5)).rejects.not.toThrow(TIMED_OUT);
  await expect(waitUntil(() => 1, broken, 30, 5)).rejects.toThrow(TypeError);

  const receiver = await startReceiver({ ...testCertificate(), secretFor: () => undefined });
  try {
    await expect(receiver.waitFor((all) => all.length > 0, 30)).rejects.toThrow(TIMED_OUT);
    await expect(receiver.waitFor(broken, 30)).rejects.not.toThrow(TIMED_OUT);
  } finally {
    await receiver.close();
  }
});
