/**
 * Natural batching ("group commit"): items submitted while `maxConcurrency` runs are busy wait
 * and go together in the next run, up to `maxBatch` per run. Under light load every item runs
 * alone at once (no added latency); under heavy load many share one statement, one round trip
 * and one commit. `run` gets the items and returns one result per item, in order. When a run of
 * several items throws, each item is run again alone, so that one bad item (input PostgreSQL
 * refuses) fails only its own caller. A run that threw may still have done its work (a statement
 * that committed and whose answer was lost): `run` must be idempotent for an item it sees again,
 * e.g. with ids given in the item before its first run (see createEventAcceptor).
 */
export interface Batcher<I, O> {
  submit(item: I): Promise<O>;
}

export interface BatcherOptions {
  maxBatch: number;
  maxConcurrency: number;
}

export function createBatcher<I, O>(run: (items: I[]) => Promise<O[]>, options: BatcherOptions): Batcher<I, O> {
  const waiting: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  let running = 0;

  const settle = async (batch: typeof waiting) => {
    try {
      const results = await run(batch.map((w) => w.item));
      batch.forEach((w, i) => w.resolve(results[i]));
    } catch (error) {
      if (batch.length === 1) return batch[0].reject(error);
      await Promise.all(batch.map((w) => settle([w])));
    }
  };

  const drain = () => {
    while (running < options.maxConcurrency && waiting.length > 0) {
      const batch = waiting.splice(0, options.maxBatch);
      running++;
      void settle(batch).finally(() => {
        running--;
        drain();
      });
    }
  };

  return {
    submit(item) {
      return new Promise<O>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        // Items submitted in the same tick join this batch.
        if (waiting.length === 1) queueMicrotask(drain);
      });
    },
  };
}
