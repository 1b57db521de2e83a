import { createBatcher } from "./batcher.js";

describe("createBatcher (natural batching)", () => {
  test("items submitted while a run is busy share the next run, up to maxBatch", async () => {
    const runs: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const batcher = createBatcher<number, number>(
      async (items) => {
        runs.push(items);
        if (runs.length === 1) await gate;
        return items.map((i) => i * 2);
      },
      { maxBatch: 3, maxConcurrency: 1 },
    );
    const first = batcher.submit(1);
    await new Promise((r) => setImmediate(r));
    const rest = [2, 3, 4, 5].map((i) => batcher.submit(i));
    release();
    expect(await Promise.all([first, ...rest])).toEqual([2, 4, 6, 8, 10]);
    expect(runs).toEqual([[1], [2, 3, 4], [5]]);
  });

  test("a failing batch is run again item by item: only the bad item fails", async () => {
    const batcher = createBatcher<number, number>(
      async (items) => {
        if (items.includes(13)) throw new Error("bad item");
        return items;
      },
      { maxBatch: 10, maxConcurrency: 1 },
    );
    const results = await Promise.allSettled([1, 13, 2].map((i) => batcher.submit(i)));
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
  });
});
