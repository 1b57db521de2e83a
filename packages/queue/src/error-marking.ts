import { Cluster, Redis, ReplyError, type Command } from "ioredis";
import { markInfrastructureError } from "@mailhooks/infrastructure-errors";

/** Tells a `reject` that already marks (a command sent again after a reconnection). */
const MARKING = Symbol("marks infrastructure errors");

/**
 * Marks (@mailhooks/infrastructure-errors) every error a command of ours fails with that is not
 * Redis's answer, so that isInfrastructureError knows them without reading their text. ioredis
 * raises those as plain `Error`s with no code: "Command timed out" (commandTimeout),
 * "Stream isn't writeable and enableOfflineQueue options is false" (a producer while Redis is
 * away), "Connection is closed.", and its AbortError and MaxRetriesPerRequestError when a
 * connection drops or its retries run out. Redis's own answers are `ReplyError`s (a script's
 * error, WRONGTYPE, LOADING): left as they are, as before. A connection `duplicate()`d from
 * these (a BullMQ worker's blocking connection) is a plain ioredis one: its errors go to BullMQ.
 *
 * Every way a command fails goes through its `reject` (the timeout, the offline queue flushed,
 * the connection closed), which ioredis itself wraps in the same way (a Cluster's redirections,
 * a script's NOSCRIPT): the error reaches the caller as the same object, its message unchanged.
 */
function markRejections(command: Command): void {
  const reject = command.reject as ((error: Error) => void) & { [MARKING]?: true };
  if (reject[MARKING]) return;
  const marking = (error: Error) => reject.call(command, error instanceof ReplyError ? error : markInfrastructureError(error));
  command.reject = Object.assign(marking, { [MARKING]: true as const });
}

/** A Redis connection whose commands fail with marked errors (markRejections). */
export class ErrorMarkingRedis extends Redis {
  override sendCommand(...args: Parameters<Redis["sendCommand"]>): unknown {
    markRejections(args[0]);
    return super.sendCommand(...args);
  }
}

/** A Redis Cluster connection whose commands fail with marked errors (markRejections). */
export class ErrorMarkingCluster extends Cluster {
  override sendCommand(...args: Parameters<Cluster["sendCommand"]>): unknown {
    markRejections(args[0]);
    return super.sendCommand(...args);
  }
}
