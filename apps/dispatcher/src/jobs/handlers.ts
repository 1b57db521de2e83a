import { JOB_NAMES, type WorkJobHandlers } from "@mailhooks/queue";
import { deliverDestination, type WorkerContext } from "./deliver-destination.js";
import { deliverTestEvent } from "./deliver-test-event.js";
import { replayEvent } from "./replay-event.js";

/**
 * The handler of each kind of work (WORK_JOB_NAMES of @mailhooks/queue): given the claimed lease,
 * each calls the one function that carries out its work. TypeScript refuses this map when a kind
 * has no handler here.
 */
export function workJobHandlers(ctx: WorkerContext): WorkJobHandlers {
  return {
    [JOB_NAMES.delivery]: (work) => deliverDestination(ctx, work),
    [JOB_NAMES.replay]: (work) => replayEvent(ctx, work),
    [JOB_NAMES.testDelivery]: (work) => deliverTestEvent(ctx, work),
  };
}
