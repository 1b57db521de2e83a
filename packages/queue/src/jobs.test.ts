import { ZodError } from "zod";
import { isWorkJobName, prepareWorkJob, runWorkJob, WORK_JOB_NAMES, workIdOf, workJobData, type WorkJobHandlers } from "./jobs.js";
import { DELIVERY_BACKOFF_TYPE, JOB_NAMES } from "./names.js";

/** The job registry on its own: what the relay, the worker, the sweeper and delivery-state read of it. */
describe("the job registry", () => {
  // Three retries: 4 attempts from the initial one, fewer from a later one.
  const budget = (firstAttempt: number) => Math.max(1, 4 - firstAttempt);
  const now = 1_000_000;

  test("names the three kinds of work, destinations first, and nothing else", () => {
    expect(WORK_JOB_NAMES).toEqual([JOB_NAMES.delivery, JOB_NAMES.replay, JOB_NAMES.testDelivery]);
    expect(isWorkJobName("delivery")).toBe(true);
    expect(isWorkJobName(JOB_NAMES.sweep)).toBe(false);
    expect(isWorkJobName("toString")).toBe(false);
  });

  test("a job's data names its work, in the field of its kind, both ways", () => {
    expect(workJobData(JOB_NAMES.delivery, "dst_1")).toEqual({ destinationId: "dst_1" });
    expect(workJobData(JOB_NAMES.replay, "rpl_1")).toEqual({ replayId: "rpl_1" });
    expect(workJobData(JOB_NAMES.testDelivery, "tst_1")).toEqual({ testDeliveryId: "tst_1" });
    expect(workIdOf(JOB_NAMES.replay, { replayId: "rpl_1", junk: 42 })).toBe("rpl_1");
    expect(workIdOf(JOB_NAMES.delivery, { replayId: "rpl_1" })).toBeNull();
    expect(workIdOf(JOB_NAMES.testDelivery, undefined)).toBeNull();
  });

  test("a delivery job gets the schedule's budget from its first attempt, the schedule's backoff, and waits until notBefore", () => {
    expect(prepareWorkJob(JOB_NAMES.delivery, { destinationId: "dst_1" }, budget, now).options).toEqual({
      attempts: 4,
      backoff: { type: DELIVERY_BACKOFF_TYPE },
    });
    const resumed = prepareWorkJob(JOB_NAMES.delivery, { destinationId: "dst_1", firstAttempt: 2, notBefore: now + 5_000 }, budget, now);
    expect(resumed.options).toEqual({ attempts: 2, backoff: { type: DELIVERY_BACKOFF_TYPE }, delay: 5_000 });
    expect(prepareWorkJob(JOB_NAMES.delivery, { destinationId: "dst_1", notBefore: now - 1 }, budget, now).options.delay).toBeUndefined();
  });

  test("replays and test deliveries get one attempt; unknown fields are dropped, wrong ones refused", () => {
    expect(prepareWorkJob(JOB_NAMES.replay, { replayId: "rpl_1", postpones: 3 }, budget, now)).toEqual({
      data: { replayId: "rpl_1" },
      options: { attempts: 1 },
    });
    expect(
      prepareWorkJob(JOB_NAMES.testDelivery, { testDeliveryId: "tst_1", webhookId: "wh_1", accountId: "acct_1" }, budget, now).options,
    ).toEqual({ attempts: 1 });
    expect(() => prepareWorkJob(JOB_NAMES.delivery, { destinationId: 42 }, budget, now)).toThrow(ZodError);
  });

  test("runWorkJob hands each job's parsed data to the handler of its name, and none on data its schema refuses", async () => {
    const calls: unknown[][] = [];
    const handlers: WorkJobHandlers = {
      delivery: async (data, run) => void calls.push(["delivery", data.destinationId, data.firstAttempt, run.attemptsMade]),
      replay: async (data) => void calls.push(["replay", data.replayId]),
      "test-delivery": async (data) => void calls.push(["test-delivery", data.testDeliveryId]),
    };
    await runWorkJob(handlers, JOB_NAMES.delivery, { destinationId: "dst_1", firstAttempt: 1 }, { attemptsMade: 2 });
    await runWorkJob(handlers, JOB_NAMES.replay, { replayId: "rpl_1" }, { attemptsMade: 0 });
    await runWorkJob(handlers, JOB_NAMES.testDelivery, { testDeliveryId: "tst_1" }, { attemptsMade: 0 });
    expect(() => runWorkJob(handlers, JOB_NAMES.replay, { destinationId: "dst_1" }, { attemptsMade: 0 })).toThrow(ZodError);
    expect(calls).toEqual([
      ["delivery", "dst_1", 1, 2],
      ["replay", "rpl_1"],
      ["test-delivery", "tst_1"],
    ]);
  });
});
