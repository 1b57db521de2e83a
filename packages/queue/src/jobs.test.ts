import { isWorkJobName, WORK_JOB_NAMES, workJob, workJobSchema } from "./jobs.js";
import { JOB_NAMES } from "./names.js";

/** The kinds of work and their jobs, on their own. */
describe("work jobs", () => {
  test("the three kinds of work, destinations first, and nothing else", () => {
    expect(WORK_JOB_NAMES).toEqual([JOB_NAMES.delivery, JOB_NAMES.replay, JOB_NAMES.testDelivery]);
    expect(isWorkJobName("delivery")).toBe(true);
    expect(isWorkJobName(JOB_NAMES.retention)).toBe(false);
    expect(isWorkJobName("toString")).toBe(false);
  });

  test("a claim's job is named by its kind, identified by its work and lease, one attempt, ids only", () => {
    expect(workJob({ kind: JOB_NAMES.replay, workId: "rpl_1", lease: 3 })).toEqual({
      name: "replay",
      data: { workId: "rpl_1", lease: 3 },
      opts: { jobId: "rpl_1-3", attempts: 1 },
    });
  });

  test("data of another shape (a job of an earlier version) is refused by the schema", () => {
    expect(workJobSchema.safeParse({ destinationId: "dst_1", webhookId: "wh_1" }).success).toBe(false);
    expect(workJobSchema.safeParse({ workId: "dst_1", lease: -1 }).success).toBe(false);
    expect(workJobSchema.parse({ workId: "dst_1", lease: 0, extra: true })).toEqual({ workId: "dst_1", lease: 0 });
  });
});
