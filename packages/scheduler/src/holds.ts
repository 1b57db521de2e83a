/**
 * What happens to a job that admission (admission.ts) refuses a slot: how long it waits in its
 * worker slot for one to free, or in the queue's delayed set before it asks again.
 */

/**
 * How long a job held back for its share waits before it asks again, in ms: 50 ms doubling to
 * 400 ms; a slow webhook's job SLOW_HOLD_MS, give or take half of it at random, since what brings
 * it back is the end of an attempt of its webhook here, which wakes the one held longest
 * (`promote`, paced: createWakePacer; a quick one wakes them all): its slots free at the pace of
 * its receiver, and the timer is only for the jobs no attempt here wakes (more than this
 * dispatcher remembers, or its webhook's attempts run elsewhere). The jitter: a hanging webhook's
 * jobs are held in a wave (its backlog fetched at once, its attempts ending together), and a wave
 * that comes back at once keeps the event loop from everyone else's jobs for as long as it takes
 * to hold it again.
 */
export function holdDelayMs(holds: number, slow = false, random: () => number = Math.random): number {
  return slow ? Math.round(SLOW_HOLD_MS * (0.5 + random())) : Math.min(400, 50 * 2 ** Math.min(6, Math.max(0, holds)));
}

/**
 * The hold of a slow webhook's job, in ms (on average). Each hold costs a fetch, a move to the
 * delayed set and a promotion in Redis, and a hanging webhook has up to its job limit of them in
 * the queue (128 from before it was known slow): with holds from 500 ms doubling, the neighbour
 * bench's five hanging webhooks made 238 holds a second (MONITOR, 3 s of the loaded run).
 */
export const SLOW_HOLD_MS = 10_000;

/** Wakes held jobs of slow webhooks, one at a time (see createWakePacer). */
export interface WakePacer {
  /**
   * Promotes `jobIds` (a slot of their webhook freed for each): the first at once when the last
   * wake was at least the pacer's interval ago, the rest one interval apart. Resolves once those
   * promoted at once are; a failed promotion is ignored (the job asks again at its hold's end).
   */
  wake(jobIds: string[]): Promise<void>;
  /** Jobs waiting for their wake. */
  readonly queued: number;
}

/**
 * The wakes of one dispatcher, paced at one per `intervalMs` (slowAttemptMs / C: a slow webhook's
 * attempt runs at least slowAttemptMs, so C slots cannot free faster than that; at that pace every
 * slot is refilled as fast as it frees, but a wave of attempts that ended together, which would
 * start together and end together again, is spread over a second). At most `maxQueued` wait (a
 * dispatcher's memory is shared by every account); past that a job comes back at its hold's end.
 */
export function createWakePacer(options: { intervalMs: number; maxQueued: number; promote: (jobId: string) => Promise<void> }): WakePacer {
  const queue: string[] = [];
  let nextAt = 0;
  let timer: NodeJS.Timeout | undefined;
  const promote = (jobId: string) => {
    nextAt = Date.now() + options.intervalMs;
    return options.promote(jobId).catch(() => undefined);
  };
  const tick = () => {
    timer = undefined;
    const jobId = queue.shift();
    if (jobId === undefined) return;
    void promote(jobId);
    schedule();
  };
  const schedule = () => {
    if (timer || queue.length === 0) return;
    timer = setTimeout(tick, Math.max(0, nextAt - Date.now()));
    timer.unref();
  };
  return {
    async wake(jobIds) {
      let now: Promise<void> | undefined;
      for (const jobId of jobIds) {
        if (!now && !timer && queue.length === 0 && nextAt <= Date.now()) now = promote(jobId);
        else if (queue.length < options.maxQueued) queue.push(jobId);
      }
      schedule();
      await now;
    },
    get queued() {
      return queue.length;
    },
  };
}

/** The starts of slow webhooks' attempts on one dispatcher, paced (see createStartPacer). */
export interface StartPacer {
  /** The time (ms) at which an attempt admitted at `now` may start: `now`, or one interval after the last turn given. */
  turn(now: number): number;
}

/**
 * Paces the starts of slow webhooks' attempts on one dispatcher at one per `intervalMs`
 * (slowAttemptMs / C, as the wakes of createWakePacer). A slow webhook's retries come due together:
 * its backlog's first attempts started together, ran into the deadline together and come back one
 * retry delay later, together. Started at once, twenty of them took the machine from every other
 * webhook's attempts for 100 to 200 ms (TLS handshakes, signatures, payload loads; the neighbour
 * phase of `npm run bench`, with probes), the longest waits of another account's events. Paced,
 * they start one interval apart: C slots of attempts that each last at least slowAttemptMs cannot
 * free faster than one per interval, so the pace costs slow webhooks no throughput; an attempt of
 * a slow webhook may start up to C + R intervals late (about slowAttemptMs), waiting in its worker
 * slot with its share's slot taken.
 */
export function createStartPacer(intervalMs: number): StartPacer {
  let next = 0;
  return {
    turn(now) {
      const at = Math.max(now, next);
      next = at + intervalMs;
      return at;
    },
  };
}

/**
 * How long, in ms, a job of a webhook that is not slow, fetched while this dispatcher's C slots
 * are taken and the reserve is not its to take, waits in its worker slot for one of the C to free
 * before it is held back (holdDelayMs). The length of the first hold: a newcomer whose job finds
 * every worker slot taken by such waits is kept no longer than a hold would keep it, and 64 quick
 * attempts free a slot every few ms.
 */
export const RESERVE_WAIT_MS = 50;

/**
 * How long, in ms, a fast webhook's job (admission.ts: quick attempts on this dispatcher, lately)
 * waits in its worker slot, any of them, for one of the C slots. Its attempts free one every few
 * ms and the waiters take them in turn: at the bench's 400 attempts a second on 64 slots, the 16
 * waiters of 80 worker slots are 40 ms deep, so 50 ms held about one job in ten. Held instead,
 * each goes to the delayed set and back (a quick bench: 28 to 30 % of attempts held first when
 * only R worker slots were left to wait in, under 1 % with this wait). The bound: a fast webhook's
 * jobs wait so only while its own attempts run on the dispatcher and none has run longer than
 * this; should they start hanging, its waiters, in every worker slot, keep a newcomer's job from
 * being fetched for at most twice this long.
 */
export const FAST_WAIT_MS = 250;

/** The jobs of one dispatcher waiting in their worker slots for one of its C slots to free. */
export interface SlotWaits {
  /**
   * Waits up to `maxMs` (RESERVE_WAIT_MS, or FAST_WAIT_MS for a fast webhook's job) for
   * `takeSlot` (which checks the share and takes the slot in one tick) to succeed, tried again
   * whenever `slotFreed` is called; resolves true once it did, false at the end of the wait. A job of a webhook that is not slow, which the worker fetched into the
   * reserve while C attempts run (the reserve not being its to take), so gets the next of the C
   * slots to free, in a millisecond or so when they are quick, instead of a trip through the
   * delayed set (a fetch, a move, a promotion: measured, 40 % more job moves than attempts for a
   * lone fast webhook before this wait).
   */
  wait(takeSlot: () => boolean, maxMs?: number): Promise<boolean>;
  /** An attempt ended here: the job waiting longest whose takeSlot succeeds has the slot. */
  slotFreed(): void;
  /** Jobs waiting now. */
  readonly waiting: number;
}

export function createSlotWaits(): SlotWaits {
  /** Oldest first, each one's try. */
  const waiting = new Set<() => boolean>();
  return {
    wait: (takeSlot, maxMs = RESERVE_WAIT_MS) =>
      new Promise<boolean>((resolve) => {
        const tryTake = () => {
          if (!takeSlot()) return false;
          done(true);
          return true;
        };
        const done = (taken: boolean) => {
          clearTimeout(timer);
          waiting.delete(tryTake);
          resolve(taken);
        };
        const timer = setTimeout(() => done(false), maxMs);
        waiting.add(tryTake);
      }),
    slotFreed() {
      for (const tryTake of waiting) if (tryTake()) break;
    },
    get waiting() {
      return waiting.size;
    },
  };
}
