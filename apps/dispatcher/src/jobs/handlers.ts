import { deliveryAttemptNumber, JOB_NAMES, type WorkJobHandlers } from "@mailhooks/queue";
import { deliverDestination, type WorkerContext } from "./deliver-destination.js";
import { deliverTestEvent } from "./deliver-test-event.js";
import { replayEvent } from "./replay-event.js";

/**
 * The handler of each job of the registry (WORK_JOBS of @mailhooks/queue): given the job's data
 * as its schema parsed it, each calls the one function that carries out its work. TypeScript
 * refuses this map when a job of the registry has no handler here.
 */
export function workJobHandlers(ctx: WorkerContext): WorkJobHandlers {
  return {
    [JOB_NAMES.delivery]: (data, run) => deliverDestination(ctx, data.destinationId, deliveryAttemptNumber(data, run.attemptsMade)),
    [JOB_NAMES.replay]: (data) => replayEvent(ctx, data.replayId),
    [JOB_NAMES.testDelivery]: (data) => deliverTestEvent(ctx, data.testDeliveryId),
  };
}
