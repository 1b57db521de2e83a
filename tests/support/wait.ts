/**
 * The tests' one wait on a condition (CONTRIBUTING.md, "Test helpers"): `waitUntil` polls a read
 * until its value is accepted. Its time-out is a `WaitTimeout` whose message matches `TIMED_OUT`,
 * as the time-out of a receiver's `waitFor` (@mailhooks/receiver) does: an absence check ("nothing
 * more arrives within N ms") asserts on it,
 *
 *   await expect(receiver.waitFor((all) => all.length > 2, 3_000)).rejects.toThrow(TIMED_OUT);
 *
 * so that it fails on any other error (a predicate that throws, a closed receiver), which a bare
 * `.rejects.toThrow()` would take for the awaited time-out.
 */

/** The time-out of every wait of the tests (`waitUntil`'s and the receivers' `waitFor`'s). */
export const TIMED_OUT = /condition not met within \d+ ms/;

/** Thrown by `waitUntil` when its time runs out; its message matches `TIMED_OUT`. */
export class WaitTimeout extends Error {
  override name = "WaitTimeout";
}

/**
 * Polls `read` every `everyMs` until `accept` holds for its value, and returns that value.
 * @throws WaitTimeout after `timeoutMs` (ms), naming the last value read; any error of `read` or
 *   `accept` as it is.
 */
export async function waitUntil<T>(
  read: () => Promise<T> | T,
  accept: (value: T) => boolean,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new WaitTimeout(`condition not met within ${timeoutMs} ms; last value: ${describe(value)}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A value for a time-out's message: JSON, cut at 2,000 characters. */
function describe(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 2_000 ? `${text.slice(0, 2_000)}…` : text;
}
