import { setNewest } from "./index.js";

describe("setNewest", () => {
  test("keeps at most max entries, forgetting the least recently set first", () => {
    const map = new Map<string, number>();
    for (let i = 0; i < 128; i++) setNewest(map, `k${i}`, i, 128);
    expect(map.size).toBe(128);
    // k0 is set again: the newest now, so k1 and k2 are the oldest.
    setNewest(map, "k0", 0, 128);
    setNewest(map, "k128", 128, 128);
    // Past 128, the oldest go down to 128 - 2 (a 64th), k1 and k2 and k3.
    expect(map.size).toBe(126);
    expect([...map.keys()].slice(0, 2)).toEqual(["k4", "k5"]);
    expect(map.has("k0")).toBe(true);
    expect(map.get("k128")).toBe(128);
  });

  test("a flood of new keys never holds more than max, and a key set again in between stays", () => {
    const map = new Map<string, number>();
    let largest = 0;
    for (let i = 0; i < 100_000; i++) {
      setNewest(map, `flood-${i}`, i, 1_000);
      if (i % 100 === 0) setNewest(map, "kept", i, 1_000);
      largest = Math.max(largest, map.size);
    }
    expect(largest).toBe(1_000);
    expect(map.has("kept")).toBe(true);
  });

  test("below max nothing is forgotten; setting a key again does not grow the map", () => {
    const map = new Map<number, string>();
    for (let i = 0; i < 10; i++) setNewest(map, i % 5, `v${i}`, 10);
    expect([...map.entries()]).toEqual([
      [0, "v5"],
      [1, "v6"],
      [2, "v7"],
      [3, "v8"],
      [4, "v9"],
    ]);
  });
});
