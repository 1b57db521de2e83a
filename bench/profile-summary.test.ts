import { STOPPED_AFTER_US, summarize, type CpuProfile } from "./profile-summary.js";

/** A profile of three frames under the root, sampled at the given intervals (µs): samples[i] lasts deltas[i + 1]. */
function profile(samples: number[], deltas: number[]): CpuProfile {
  const frame = (functionName: string, url = "") => ({ functionName, url, lineNumber: 0 });
  return {
    nodes: [
      { id: 1, callFrame: frame("(root)"), children: [2, 3, 4] },
      { id: 2, callFrame: frame("removeListener", "node:events") },
      { id: 3, callFrame: frame("send", "file:///repo/apps/dispatcher/dist/send.js") },
      { id: 4, callFrame: frame("(idle)") },
    ],
    startTime: 0,
    endTime: deltas.reduce((a, b) => a + b, 0),
    samples,
    timeDeltas: deltas,
  };
}

describe("summarize", () => {
  test("counts each sample's interval to the next as its frame's self time", () => {
    const { functions, special } = summarize(profile([3, 3, 4, 2], [0, 1_000, 1_000, 3_000, 1_000]));
    expect(functions.get("send  /repo/apps/dispatcher/dist/send.js:1")?.us).toBe(2_000);
    expect(special.get("(idle)")).toBe(3_000);
    expect(special.get("(stopped)")).toBe(0);
  });

  test("a gap longer than STOPPED_AFTER_US (a SIGSTOPped process) is stopped time, not the sampled frame's", () => {
    const pause = 1_300_000;
    const { functions, special } = summarize(profile([3, 2, 3], [0, 1_000, pause, 1_000]));
    expect(functions.get("removeListener  node:events:1")?.us).toBe(STOPPED_AFTER_US);
    expect(special.get("(stopped)")).toBe(pause - STOPPED_AFTER_US);
  });
});
