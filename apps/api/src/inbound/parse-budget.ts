import { getHeapStatistics } from "node:v8";

/**
 * A byte budget (a semaphore counting bytes) for raw messages being turned into events in this
 * process. Each message is charged the heap it may take (messageHeapCost of message-budget.ts: at
 * most MAX_MESSAGE_HEAP_COST, 108 MiB), so that the messages in progress together stay within
 * the capacity whatever their shape. A message waits its turn in arrival order; when the wait
 * would be too long, it is refused (the caller answers 503 with Retry-After) rather than queued
 * for good. docs/security.md, "Raw messages and memory".
 */
export interface ParseBudget {
  /**
   * Runs `work` once `bytes` fit in the budget beside the messages in progress, and gives them
   * back when it settles.
   * @throws ParseBudgetExhaustedError when they did not fit within the wait, or too many bytes already wait
   */
  run<T>(bytes: number, work: () => Promise<T>): Promise<T>;
  /** Bytes in progress now (for tests and metrics). */
  inUse(): number;
}

/** No room for a message now; `retryAfterSeconds` is when to try again. */
export class ParseBudgetExhaustedError extends Error {
  override name = "ParseBudgetExhaustedError";
  constructor(readonly retryAfterSeconds: number) {
    super("too many raw messages are being processed at once; try again later");
  }
}

export interface ParseBudgetOptions {
  /** Bytes charged to the messages processed at once; a message charged more than this runs alone. */
  capacityBytes: number;
  /** The longest a message waits for room, in ms. */
  maxWaitMs: number;
  /** The most bytes that may wait; beyond, a message is refused at once. */
  maxWaitingBytes: number;
}

/** The share of V8's heap limit that raw messages in progress may be charged together. */
const HEAP_SHARE = 0.4;

/**
 * The budget that fits this process's heap: two fifths of V8's heap limit (about 82 MiB under
 * `npm run start:api`'s 192 MB heap: one 10 MiB message of text and smaller ones beside it; the
 * costliest message runs alone).
 */
export function defaultParseBudgetOptions(): ParseBudgetOptions {
  const capacityBytes = Math.floor(getHeapStatistics().heap_size_limit * HEAP_SHARE);
  return { capacityBytes, maxWaitMs: 15_000, maxWaitingBytes: 4 * capacityBytes };
}

export function createParseBudget(options: ParseBudgetOptions): ParseBudget {
  let used = 0;
  let waitingBytes = 0;
  const waiting: { bytes: number; start: () => void }[] = [];
  // A message over the capacity runs only alone.
  const fits = (bytes: number) => used === 0 || used + bytes <= options.capacityBytes;
  const wake = () => {
    while (waiting.length > 0 && fits(waiting[0].bytes)) waiting.shift()!.start();
  };
  const release = (bytes: number) => {
    used -= bytes;
    wake();
  };
  const acquire = (bytes: number): Promise<void> => {
    if (waiting.length === 0 && fits(bytes)) {
      used += bytes;
      return Promise.resolve();
    }
    if (waitingBytes + bytes > options.maxWaitingBytes) return Promise.reject(new ParseBudgetExhaustedError(retryAfter()));
    return new Promise<void>((resolve, reject) => {
      const entry = {
        bytes,
        start: () => {
          clearTimeout(timer);
          waitingBytes -= bytes;
          used += bytes;
          resolve();
        },
      };
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(entry), 1);
        waitingBytes -= bytes;
        reject(new ParseBudgetExhaustedError(retryAfter()));
        // The head of the line may have been this one: the next may fit.
        wake();
      }, options.maxWaitMs);
      waitingBytes += bytes;
      waiting.push(entry);
    });
  };
  const retryAfter = () => Math.max(1, Math.ceil(options.maxWaitMs / 1000 / 3));
  return {
    async run(bytes, work) {
      await acquire(bytes);
      try {
        return await work();
      } finally {
        release(bytes);
      }
    },
    inUse: () => used,
  };
}
