// Types of jest-run.mjs for the TypeScript that imports it (tests/workspace/test-tiers.test.ts).

/** One jest run of a plan: its arguments, its environment, where its JSON results go. */
export interface PlannedRun {
  args: string[];
  env: Record<string, string>;
  part: string | undefined;
}

export function splitJestArguments(args: string[]): { options: string[][]; paths: string[] };

export function planTiers(
  args: string[],
  aloneFiles: string[],
  options?: { workers?: number; isFile?: (file: string) => boolean },
): { runs: PlannedRun[]; outputFile: string | undefined; check: boolean };

export function runInTiers(args: string[], env?: Record<string, string>): Promise<number>;
export function runJest(args: string[], env?: Record<string, string>): number;
export function prepare(args: string[], env?: Record<string, string>): number;
export function jestArguments(usage: string): string[];
export const root: string;
export const certDir: string;
