import { createParseBudget, ParseBudgetExhaustedError } from "./parse-budget.js";

/** A promise and the function that resolves it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

describe("createParseBudget", () => {
  test("messages run together while their bytes fit; the next waits for room, in arrival order", async () => {
    const budget = createParseBudget({ capacityBytes: 10, maxWaitMs: 5_000, maxWaitingBytes: 100 });
    const order: string[] = [];
    const first = gate();
    const a = budget.run(6, async () => {
      order.push("a");
      await first.wait;
    });
    const b = budget.run(4, async () => void order.push("b"));
    const c = budget.run(8, async () => void order.push("c"));
    const d = budget.run(1, async () => void order.push("d"));
    await b;
    expect(order).toEqual(["a", "b"]);
    expect(budget.inUse()).toBe(6);
    first.open();
    await Promise.all([a, c, d]);
    expect(order).toEqual(["a", "b", "c", "d"]);
    expect(budget.inUse()).toBe(0);
  });

  test("a message larger than the capacity runs alone", async () => {
    const budget = createParseBudget({ capacityBytes: 10, maxWaitMs: 5_000, maxWaitingBytes: 100 });
    expect(await budget.run(50, async () => "done")).toBe("done");
  });

  test("a message that waits too long, or finds too many bytes waiting, is refused with a time to come back", async () => {
    const budget = createParseBudget({ capacityBytes: 10, maxWaitMs: 50, maxWaitingBytes: 15 });
    const hold = gate();
    const running = budget.run(10, () => hold.wait);
    const late = budget.run(10, async () => "never");
    const full = budget.run(10, async () => "never");
    await expect(full).rejects.toBeInstanceOf(ParseBudgetExhaustedError);
    await expect(late).rejects.toMatchObject({ retryAfterSeconds: 1 });
    hold.open();
    await running;
    // The refused ones left nothing behind.
    expect(budget.inUse()).toBe(0);
    expect(await budget.run(10, async () => "ok")).toBe("ok");
  });

  test("work that throws gives its bytes back", async () => {
    const budget = createParseBudget({ capacityBytes: 10, maxWaitMs: 50, maxWaitingBytes: 100 });
    await expect(budget.run(10, async () => Promise.reject(new Error("bad message")))).rejects.toThrow("bad message");
    expect(budget.inUse()).toBe(0);
  });
});
