import type { JobsOptions } from "bullmq";
import { z } from "zod";
import { JOB_NAMES } from "./names.js";

/**
 * The jobs of the deliveries queue: one definition each. A job is one claim of one unit of
 * work: its name is the kind of work (a destination's attempt, a replay, a test delivery), its
 * data names the work and the lease the claim took (docs/scheduler.md). Job data carries ids
 * only, never secrets or payloads: the worker reads those from PostgreSQL, and acts only while
 * the lease named is the work's current one. Only the dispatchers' relay adds jobs, after the
 * claim that leased their work has committed; the worker parses the data again and runs the
 * handler of the same name. A new kind of work is one name here, one handler in the dispatcher
 * and what it writes in @mailhooks/delivery-state: TypeScript names every place it is missing.
 */

/** The kinds of work, as job names (stored in Redis: never rename one). */
export const WORK_JOB_NAMES = [JOB_NAMES.delivery, JOB_NAMES.replay, JOB_NAMES.testDelivery] as const;

/** A kind of work: the name of the job that carries it out. */
export type WorkJobName = (typeof WORK_JOB_NAMES)[number];

/** Whether `name` is a kind of work (a job's name as Redis or the work queue holds it). */
export function isWorkJobName(name: string): name is WorkJobName {
  return (WORK_JOB_NAMES as readonly string[]).includes(name);
}

/** The data of every work job: the unit of work and the claim's lease. */
export const workJobSchema = z.object({
  workId: z.string().min(1).max(100),
  lease: z.number().int().nonnegative(),
});
export type WorkJobData = z.infer<typeof workJobSchema>;

/** One claimed unit of work, as the claim answers it and the relay adds it. */
export interface ClaimedWork extends WorkJobData {
  kind: WorkJobName;
  /** Granted from the reserve: its job goes to the reserve's lane (QUEUE_NAMES.reserveDeliveries). */
  reserved?: boolean;
  /** A job ready behind running attempts: its place among them (BullMQ priority, lower first); none: it starts at once. */
  priority?: number;
}

/**
 * The BullMQ job of `work`: its id names the work and the lease (a claim never makes two jobs,
 * and a later claim of the same work makes another), one attempt, no backoff (a retry is a new
 * claim of the work once its delay has passed).
 */
export function workJob(work: ClaimedWork): { name: WorkJobName; data: WorkJobData; opts: JobsOptions } {
  return {
    name: work.kind,
    data: { workId: work.workId, lease: work.lease },
    opts: { jobId: `${work.workId}-${work.lease}`, attempts: 1, ...(work.priority === undefined ? {} : { priority: work.priority }) },
  };
}

/** The worker's handler of each kind of work, given the job's data as workJobSchema parsed it. */
export type WorkJobHandlers = { readonly [N in WorkJobName]: (data: WorkJobData) => Promise<void> };
