import { CATCH_UP_MS, decide, rateIntervalMs, type Candidate, type DecisionInput, type LeaseCount } from "./decide.js";

const NOW = 1_000_000;

function candidate(webhookId: string, accountId = "acc_a", more: Partial<Candidate> = {}): Candidate {
  return {
    webhookId,
    accountId,
    status: "enabled",
    mode: "push",
    rateLimit: null,
    turnAt: null,
    bypassWaiting: false,
    failing: false,
    ...more,
  };
}

function held(webhookId: string, leases: number, accountId = "acc_a", reserved = 0): LeaseCount {
  return { webhookId, accountId, leases, reserved };
}

function input(more: Partial<DecisionInput>): DecisionInput {
  return { now: NOW, slots: 8, reserve: 2, leases: [], candidates: [], ...more };
}

const granted = (decision: ReturnType<typeof decide>) => Object.fromEntries(decision.grants.map((g) => [g.webhookId, g.count]));

describe("the one decision", () => {
  test("alone, one webhook takes every slot, and nothing of the reserve", () => {
    const decision = decide(input({ candidates: [candidate("wh_1")] }));
    expect(decision.grants).toEqual([{ webhookId: "wh_1", count: 8, reserved: 0, bypassOnly: false, turnAt: null }]);
  });

  test("free slots go to the webhooks holding the fewest, not to the one that holds most", () => {
    const decision = decide(input({ leases: [held("wh_busy", 5)], candidates: [candidate("wh_busy"), candidate("wh_new")] }));
    // 3 free: wh_new reaches wh_busy's 5 only after 5, so it takes all 3.
    expect(granted(decision)).toEqual({ wh_new: 3 });
  });

  test("accounts first: an account's one webhook gets as much as another account's three together", () => {
    const decision = decide(
      input({
        slots: 8,
        reserve: 0,
        candidates: [candidate("wh_a1", "acc_a"), candidate("wh_a2", "acc_a"), candidate("wh_a3", "acc_a"), candidate("wh_b", "acc_b")],
      }),
    );
    expect(granted(decision).wh_b).toBe(4);
    expect((granted(decision).wh_a1 ?? 0) + (granted(decision).wh_a2 ?? 0) + (granted(decision).wh_a3 ?? 0)).toBe(4);
  });

  test("slots full: a webhook holding nothing takes a reserve slot at once; one holding something does not", () => {
    const decision = decide(input({ leases: [held("wh_hang", 8)], candidates: [candidate("wh_hang"), candidate("wh_new", "acc_b")] }));
    expect(decision.grants).toEqual([{ webhookId: "wh_new", count: 1, reserved: 1, bypassOnly: false, turnAt: null }]);
  });

  test("a failing webhook holding nothing gets no reserve slot, and a healthy one wins a free slot from it", () => {
    const full = decide(
      input({
        leases: [held("wh_hang", 8)],
        candidates: [candidate("wh_failing", "acc_a", { failing: true }), candidate("wh_new", "acc_a")],
      }),
    );
    expect(granted(full)).toEqual({ wh_new: 1 });
    const oneFree = decide(
      input({
        reserve: 0,
        leases: [held("wh_hang", 7)],
        candidates: [candidate("wh_failing", "acc_a", { failing: true }), candidate("wh_new", "acc_a")],
      }),
    );
    expect(granted(oneFree)).toEqual({ wh_new: 1 });
    // Alone, a failing webhook still takes every free slot: nobody else wants them.
    expect(granted(decide(input({ candidates: [candidate("wh_failing", "acc_a", { failing: true })] })))).toEqual({ wh_failing: 8 });
  });

  test("an account takes at most its share of the reserve; another account finds the rest", () => {
    const many = Array.from({ length: 6 }, (_, i) => candidate(`wh_a${i}`, "acc_a"));
    const decision = decide(
      input({ reserve: 4, leases: [held("wh_hang", 8, "acc_x")], candidates: [...many, candidate("wh_b", "acc_b")] }),
    );
    const fromA = decision.grants.filter((g) => g.webhookId.startsWith("wh_a"));
    // acc_a alone holds reserve: 4 / (1 + 1) = 2; then acc_b: 4 / (2 + 1) = 1.
    expect(fromA.length).toBe(2);
    expect(granted(decision).wh_b).toBe(1);
  });

  test("leases of dispatchers that died (more than the slots) leave no slot and no reserve", () => {
    expect(decide(input({ leases: [held("wh_dead", 20)], candidates: [candidate("wh_new", "acc_b")] })).grants).toEqual([]);
  });

  test("rate_limit: one turn per interval, no more than CATCH_UP_MS of missed turns at once, and the next turn after them", () => {
    const interval = rateIntervalMs(100); // 11.5 ms
    const idle = decide(input({ candidates: [candidate("wh_r", "acc_a", { rateLimit: 100, turnAt: null })] }));
    const made = Math.floor(CATCH_UP_MS / interval) + 1;
    expect(idle.grants[0]).toMatchObject({ count: Math.min(8, made) });
    const ready = decide(input({ candidates: [candidate("wh_r", "acc_a", { rateLimit: 100, turnAt: NOW - interval })] }));
    expect(ready.grants[0]).toMatchObject({ count: 2, turnAt: NOW - interval + 2 * interval });
  });

  test("rate_limit: a turn not due parks the webhook until it, without a lease", () => {
    const decision = decide(input({ candidates: [candidate("wh_r", "acc_a", { rateLimit: 5, turnAt: NOW + 100 })] }));
    expect(decision).toEqual({ grants: [], parked: [{ webhookId: "wh_r", until: NOW + 100 }], unserved: 0 });
  });

  test("paused and listen: parked until a change, except replays to a target_url; a disabled listen webhook's leftovers are claimed", () => {
    const decision = decide(
      input({
        slots: 16,
        candidates: [
          candidate("wh_paused", "acc_a", { status: "paused" }),
          candidate("wh_override", "acc_a", { status: "paused", bypassWaiting: true }),
          candidate("wh_listen", "acc_b", { mode: "listen" }),
          candidate("wh_listen_override", "acc_c", { mode: "listen", bypassWaiting: true }),
          candidate("wh_listen_disabled", "acc_d", { mode: "listen", status: "disabled" }),
        ],
      }),
    );
    expect(decision.parked).toEqual([
      { webhookId: "wh_paused", until: null },
      { webhookId: "wh_listen", until: null },
    ]);
    expect(decision.grants).toEqual([
      { webhookId: "wh_override", count: 6, reserved: 0, bypassOnly: true, turnAt: null },
      { webhookId: "wh_listen_override", count: 5, reserved: 0, bypassOnly: true, turnAt: null },
      { webhookId: "wh_listen_disabled", count: 5, reserved: 0, bypassOnly: false, turnAt: null },
    ]);
  });
});
