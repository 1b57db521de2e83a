/** Statistics of the benchmark: percentiles of samples, and a figure over repetitions. */

/** The p-th percentile (nearest rank) of ascending `sorted`; NaN when empty. */
export function percentile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN;
}

/** p50 / p95 / p99 of `samples` (any order). */
export function percentiles(samples: number[]): { p50: number; p95: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99) };
}

/** One figure measured once per repetition: the median, with the range. */
export interface Figure {
  median: number;
  min: number;
  max: number;
  samples: number[];
}

/** The median of the repetitions (the lower middle one for an even count). */
export function figure(samples: number[]): Figure {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: sorted[Math.floor((sorted.length - 1) / 2)], min: sorted[0], max: sorted[sorted.length - 1], samples };
}

export function formatFigure(f: Figure, digits = 0): string {
  return f.samples.length > 1
    ? `${f.median.toFixed(digits)} (${f.min.toFixed(digits)}..${f.max.toFixed(digits)})`
    : f.median.toFixed(digits);
}
