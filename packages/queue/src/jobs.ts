import { z } from "zod";
import { JOB_NAMES } from "./names.js";

/**
 * One definition per job: name, zod schema of its data, inferred type. Job data carries ids
 * only, never secrets or payloads: those are read from PostgreSQL by the dispatcher. The worker
 * parses data again with the same schema before acting.
 */

const id = z.string().min(1).max(100);

/** Delivers one destination (event x webhook): the initial attempt and its retries. */
export const deliveryJob = {
  name: JOB_NAMES.delivery,
  schema: z.object({ destinationId: id }),
} as const;

/** The test event sent once when a webhook is created: one attempt, no retry. */
export const testDeliveryJob = {
  name: JOB_NAMES.testDelivery,
  schema: z.object({ webhookId: id, accountId: id }),
} as const;

export type DeliveryJobData = z.infer<typeof deliveryJob.schema>;
export type TestDeliveryJobData = z.infer<typeof testDeliveryJob.schema>;
