import { z } from "zod";
import { JOB_NAMES } from "./names.js";

/**
 * One definition per job: name, zod schema of its data, inferred type. Job data carries ids
 * only, never secrets or payloads: those are read from PostgreSQL by the dispatcher. Jobs are
 * written to the outbox by @mailhooks/delivery-state and added by the dispatchers' relay, which
 * parses them with these schemas; the worker parses them again before acting. The maintenance jobs (retention,
 * sweep) carry no data: only the dispatchers' job schedulers produce them.
 */

const id = z.string().min(1).max(100);

/**
 * Who the work is for: the fair scheduler (packages/scheduler) shares the dispatchers among
 * webhooks and accounts by these ids and applies the webhook's rate_limit. Jobs relayed before
 * outbox rows named their owner have none and are admitted at once.
 */
const owner = { webhookId: id.optional(), accountId: id.optional() };

/**
 * Delivers one destination (event x webhook): the initial attempt and its retries. A job queued
 * again by the sweeper after its first job was lost starts at `firstAttempt` (the attempts
 * already recorded), so that the schedule and the log go on where they stopped.
 */
export const deliveryJob = {
  name: JOB_NAMES.delivery,
  schema: z.object({
    destinationId: id,
    ...owner,
    firstAttempt: z.number().int().min(0).max(10).optional(),
    /** Epoch ms before which the (re-queued) attempt is not due: its retry delay is kept. */
    notBefore: z.number().int().nonnegative().optional(),
  }),
} as const;

/** A test event (at webhook creation, or asked for again): one attempt, no retry. */
export const testDeliveryJob = {
  name: JOB_NAMES.testDelivery,
  schema: z.object({ testDeliveryId: id, ...owner }),
} as const;

/** One replay of a stored event (CONTRACT.md section 7): one attempt, no retry. */
export const replayJob = {
  name: JOB_NAMES.replay,
  schema: z.object({ replayId: id, ...owner }),
} as const;

export type DeliveryJobData = z.infer<typeof deliveryJob.schema>;
export type TestDeliveryJobData = z.infer<typeof testDeliveryJob.schema>;
export type ReplayJobData = z.infer<typeof replayJob.schema>;
