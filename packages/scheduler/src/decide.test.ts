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
    quick: false,
    ...more,
  };
}

function held(webhookId: string, leases: number, accountId = "acc_a", reserved = 0, quick = false): LeaseCount {
  return { webhookId, accountId, leases, reserved, quick };
}

function input(more: Partial<DecisionInput>): DecisionInput {
  return { now: NOW, slots: 8, reserve: 2, leases: [], candidates: [], ...more };
}

const granted = (decision: ReturnType<typeof decide>) => Object.fromEntries(decision.grants.map((g) => [g.webhookId, g.count]));

describe("the one decision", () => {
  test("alone, one webhook takes every slot, and nothing of the reserve", () => {
    const decision = decide(input({ candidates: [candidate("wh_1")] }));
    expect(decision.grants).toEqual([{ webhookId: "wh_1", count: 8, reserved: 0, ready: 0, priority: 1, bypassOnly: false, turnAt: null }]);
  });

  test("free slots go to the webhooks holding the fewest, not to the one that holds most", () => {
    const decision = decide(input({ leases: [held("wh_busy", 5)], candidates: [candidate("wh_busy"), candidate("wh_new")] }));
    // 3 idle: wh_new reaches wh_busy's 5 only after 5, so it takes all 3 (never answered: nothing ready).
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
    expect(decision.grants).toEqual([
      { webhookId: "wh_new", count: 1, reserved: 1, ready: 0, priority: 1, bypassOnly: false, turnAt: null },
    ]);
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

  test("leases of dispatchers that died (more than the lanes hold) leave no room in their lane; the other lane is its own", () => {
    const slotsOverfull = decide(input({ leases: [held("wh_dead", 20)], candidates: [candidate("wh_new", "acc_b")] }));
    expect(slotsOverfull.grants).toEqual([
      { webhookId: "wh_new", count: 1, reserved: 1, ready: 0, priority: 1, bypassOnly: false, turnAt: null },
    ]);
    const bothOverfull = decide(
      input({ leases: [held("wh_dead", 20), held("wh_dead_r", 5, "acc_a", 5)], candidates: [candidate("wh_new", "acc_b")] }),
    );
    expect(bothOverfull.grants).toEqual([]);
  });

  test("ready jobs: an quick webhook takes a job ready behind each slot (2 S); one never answered or failing, the slots alone", () => {
    const lane = (decision: ReturnType<typeof decide>) => decision.grants.map((g) => [g.webhookId, g.count - g.reserved]);
    expect(lane(decide(input({ candidates: [candidate("wh_ok", "acc_a", { quick: true })] })))).toEqual([["wh_ok", 16]]);
    expect(lane(decide(input({ candidates: [candidate("wh_new")] })))).toEqual([["wh_new", 8]]);
    // Beside 6 quick leases (6 of weight), an unanswered webhook takes the rest 2 by 2: 5.
    const mixed = decide(input({ leases: [held("wh_ok", 6, "acc_a", 0, true)], candidates: [candidate("wh_new", "acc_b")] }));
    expect(lane(mixed)).toEqual([["wh_new", 5]]);
  });

  test("ready jobs never wait behind an unanswered attempt: once unanswered leases fill the slots, a newcomer takes the reserve", () => {
    const decision = decide(
      input({ leases: [held("wh_hang", 8)], candidates: [candidate("wh_hang"), candidate("wh_ok", "acc_b", { quick: true })] }),
    );
    expect(decision.grants).toEqual([
      { webhookId: "wh_ok", count: 1, reserved: 1, ready: 0, priority: 1, bypassOnly: false, turnAt: null },
    ]);
  });

  test("ready jobs come after the idle slots and the reserve, and wait in the order of their account's load", () => {
    const decision = decide(
      input({
        leases: [held("wh_a", 4, "acc_a", 0, true)],
        candidates: [candidate("wh_a", "acc_a", { quick: true }), candidate("wh_b", "acc_b", { quick: true })],
      }),
    );
    // 4 idle slots to wh_b (max-min), then the lane's other 8 of room: 4 ready jobs each.
    expect(decision.grants).toEqual([
      { webhookId: "wh_a", count: 4, reserved: 0, ready: 4, priority: 5, bypassOnly: false, turnAt: null },
      { webhookId: "wh_b", count: 8, reserved: 0, ready: 4, priority: 1, bypassOnly: false, turnAt: null },
    ]);
    // A newcomer finding no idle slot takes the reserve before anyone's ready jobs.
    const full = decide(
      input({
        leases: [held("wh_a", 10, "acc_a", 0, true)],
        candidates: [candidate("wh_a", "acc_a", { quick: true }), candidate("wh_b", "acc_b", { quick: true })],
      }),
    );
    expect(full.grants).toEqual([{ webhookId: "wh_b", count: 7, reserved: 1, ready: 6, priority: 1, bypassOnly: false, turnAt: null }]);
  });

  test("reserve leases take no room of the slots' lane", () => {
    const decision = decide(input({ leases: [held("wh_r", 2, "acc_a", 2)], candidates: [candidate("wh_new", "acc_b")] }));
    expect(granted(decision)).toEqual({ wh_new: 8 });
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
      { webhookId: "wh_override", count: 6, reserved: 0, ready: 0, priority: 1, bypassOnly: true, turnAt: null },
      { webhookId: "wh_listen_override", count: 5, reserved: 0, ready: 0, priority: 1, bypassOnly: true, turnAt: null },
      { webhookId: "wh_listen_disabled", count: 5, reserved: 0, ready: 0, priority: 1, bypassOnly: false, turnAt: null },
    ]);
  });
});
