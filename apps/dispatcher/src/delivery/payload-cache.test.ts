import { createPayloadCache } from "./payload-cache.js";

/**
 * The byte budget of shared payloads (issue 17 item 2), on its own: `load` stands for
 * loadPayload (PostgreSQL is exercised by tests/chaos/crash-loop.test.ts), and lets the test see
 * which reads are under way.
 */
const KIB = 1024;
const ref = (eventId: string, payloadBytes: number | null, payload: string | null = null) => ({
  eventId,
  eventCreatedAt: new Date(0),
  payloadBytes,
  payload,
});

function loader() {
  const reads: string[] = [];
  const pending = new Map<string, (text: string | null) => void>();
  return {
    reads,
    load: (eventId: string) => {
      reads.push(eventId);
      return new Promise<string | null>((resolve) => pending.set(eventId, resolve));
    },
    finish: (eventId: string, text: string | null) => pending.get(eventId)!(text),
  };
}
const tick = () => new Promise((r) => setImmediate(r));

describe("createPayloadCache", () => {
  test("an inline payload is returned as is; a purged one is null; neither is counted", async () => {
    const { load } = loader();
    const cache = createPayloadCache(load, 100 * KIB);
    expect((await cache.acquire(ref("e1", 2, "{}")))!.body).toBe("{}");
    expect(await cache.acquire(ref("e2", null))).toBeNull();
    expect(cache.usedBytes()).toBe(0);
  });

  test("attempts of one event share one read and one Buffer", async () => {
    const l = loader();
    const cache = createPayloadCache(l.load, 100 * KIB);
    const all = Promise.all([1, 2, 3].map(() => cache.acquire(ref("big", 80 * KIB))));
    await tick();
    l.finish("big", "x".repeat(80 * KIB));
    const held = await all;
    expect(l.reads).toEqual(["big"]);
    expect(new Set(held.map((h) => h!.body)).size).toBe(1);
    expect(Buffer.isBuffer(held[0]!.body)).toBe(true);
    expect(cache.usedBytes()).toBe(80 * KIB);
  });

  test("a payload that does not fit waits until one is released, first come first served; idle ones make room", async () => {
    const l = loader();
    const cache = createPayloadCache(l.load, 100 * KIB);
    const a = cache.acquire(ref("a", 60 * KIB));
    await tick();
    let bDone = false;
    const b = cache.acquire(ref("b", 60 * KIB)).then((h) => ((bDone = true), h));
    await tick();
    expect(l.reads).toEqual(["a"]);
    l.finish("a", "a".repeat(60 * KIB));
    const heldA = (await a)!;
    await tick();
    expect([bDone, l.reads]).toEqual([false, ["a"]]);
    heldA.release();
    await tick();
    // a was kept while nobody needed the room; b's read drops it.
    expect(l.reads).toEqual(["a", "b"]);
    l.finish("b", "b".repeat(60 * KIB));
    (await b)!.release();
    expect(cache.usedBytes()).toBe(60 * KIB);
    // b, idle, is shared again without a read.
    const again = (await cache.acquire(ref("b", 60 * KIB)))!;
    expect(l.reads).toEqual(["a", "b"]);
    again.release();
  });

  test("a payload larger than the whole budget is read once nothing else is held; a failed read holds nothing", async () => {
    const l = loader();
    const cache = createPayloadCache(l.load, 50 * KIB);
    const small = cache.acquire(ref("s", 10 * KIB));
    await tick();
    const huge = cache.acquire(ref("h", 80 * KIB));
    await tick();
    expect(l.reads).toEqual(["s"]);
    l.finish("s", "s".repeat(10 * KIB));
    (await small)!.release();
    await tick();
    expect(l.reads).toEqual(["s", "h"]);
    l.finish("h", "h".repeat(80 * KIB));
    (await huge)!.release();

    const failing = createPayloadCache(() => Promise.reject(new Error("PostgreSQL is away")), 50 * KIB);
    await expect(failing.acquire(ref("f", 10 * KIB))).rejects.toThrow("PostgreSQL is away");
    expect(failing.usedBytes()).toBe(0);
  });
});
