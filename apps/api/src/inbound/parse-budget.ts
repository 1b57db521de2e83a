import { getHeapStatistics } from "node:v8";

/**
 * A byte budget for raw messages being turned into events in this process (parsed by
 * mailparser, serialized into their envelope, written to PostgreSQL). Each costs some times its
 * size in heap (its text, its envelope, the driver's escaped copy of it, two bytes per character
 * for non-Latin-1 text): many 10 MiB messages at once would pass the API's heap limit and end the
 * process (issue 17 item 1). A message waits its turn in arrival order; when the wait would be
 * too long, it is refused (the caller answers 503 with Retry-After) rather than queued for good.
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
  /** Bytes of raw messages processed at once; a message larger than this runs alone. */
  capacityBytes: number;
  /** The longest a message waits for room, in ms. */
  maxWaitMs: number;
  /** The most bytes that may wait; beyond, a message is refused at once. */
  maxWaitingBytes: number;
}

/**
 * The budget that fits this process's heap: a twelfth of V8's heap limit (about 17 MB under
 * `npm run start:api`'s 192 MB heap: one 10 MiB message and smaller ones beside it), and never
 * less than one message of `messageLimitBytes`, so that any acceptable message can run alone.
 */
export function defaultParseBudgetOptions(messageLimitBytes: number): ParseBudgetOptions {
  const capacityBytes = Math.max(messageLimitBytes, Math.floor(getHeapStatistics().heap_size_limit / 12));
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
