/**
 * The command line of `npm run bench` (the project's shared @mailhooks/command-line: --help
 * prints the usage and exits 0, a usage error exits 2) and the sizes of each phase it implies.
 */
import { createCommand, InvalidArgumentError } from "@mailhooks/command-line";

export interface BenchArgs {
  quick: boolean;
  grown: boolean;
  reseed: boolean;
  seedEvents: number;
  sizes: Sizes;
}

export interface Sizes {
  reps: number;
  /** Events of a burst (one webhook: one delivery each). */
  burst: number;
  /** Requests of the calibration and of the ingest phase. */
  ingest: number;
  /** Events of the batch phase, `batchSize` per request (stored, not delivered). */
  batch: number;
  batchSize: number;
  /** Deliveries of each floor run. */
  floor: number;
  /** Events of the fan-out phase (5 webhooks each). */
  fanoutEvents: number;
  pacedMs: number;
  /** Events/s of the paced phase; undefined: half the burst's median rate (the target's rate). */
  pacedRate?: number;
  retries: number;
  /** The neighbour phase: events/s of its paced runs over the 20 healthy webhooks (at most: a
   * quarter of the burst's median rate when that is less), for how long (ms) each, the deliveries queued to its hanging webhooks, and how long after its loaded run's
   * last request the arrivals are waited for before the rest count as missing (ms). */
  neighbourRate: number;
  neighbourMs: number;
  neighbourBacklog: number;
  neighbourArrivalCapMs: number;
}

/** A commander argument parser for an integer of at least `min`. */
const integerAtLeast = (min: number) => (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < min) throw new InvalidArgumentError(`must be an integer of at least ${min}`);
  return Number(value);
};

/** Parses argv; --help and usage errors print and exit before anything starts. */
export function parseBenchArgs(argv: string[]): BenchArgs {
  const options = createCommand({
    name: "npm run bench --",
    description:
      "The benchmark (bench/README.md), one run: the bare Express route (calibration), ingest, batch ingest, the floor of the stack with got and undici, burst end to end, fan-out, paced latency, retry timing, peak memory, each phase repeated (3 times, quick 1), then once healthy webhooks paced beside hanging ones that hold a backlog (the neighbour phase, on processes and a redis-server of its own), with the load generator in its own process. Builds the workspaces first (tsc -b), runs the built API and dispatcher, prints a table and writes bench/results/latest.json. --grown runs the same on a seeded database of 5 million events, EXPLAINs the list queries and times the retention purge. bench/README.md explains every figure.",
    examples: [
      "npm run bench",
      "npm run bench -- --quick",
      "npm run bench -- --grown",
      "BENCH_PROFILE=1 npm run bench -- --quick && npm run bench:profile-summary",
    ],
    moreEnvironment: {
      BENCH_DATABASE_URL:
        "default: postgresql://postgres@127.0.0.1:5432/webhooks_bench (--grown: the database webhooks_bench_grown on the same server)",
      REDIS_URL: "default: redis://127.0.0.1:6379",
      BENCH_PROFILE:
        "optional: 1 writes V8 CPU profiles of the API and the dispatcher to .tmp/profiles (npm run bench:profile-summary prints their top functions)",
    },
  })
    .option("--quick", "one repetition of each phase on smaller sizes (CI; about 2 minutes on an idle machine)")
    .option(
      "--grown",
      "first seed webhooks_bench_grown with 5 million events and 15 million delivery rows (once; reused while the seed and the migrations are unchanged), then run the same phases on it, EXPLAIN the list queries and time the retention purge",
    )
    .option("--reseed", "with --grown: drop the seeded database and seed it again")
    .option("--seed-events <N>", "with --grown: seed N events (deliveries: 3 x N, expired day: N / 5)", integerAtLeast(1_000), 5_000_000)
    // autocannon needs at least one request per connection (32), and fan-out sends N / 5.
    .option(
      "--events <N>",
      "events of the burst (default 5000, quick 2000); ingest, floor and fan-out scale with it (the batch phase: 30000 events, quick 10000)",
      integerAtLeast(200),
    )
    .option("--reps <N>", "repetitions of each phase (default 3, quick 1)", integerAtLeast(1))
    .option("--neighbour-backlog <N>", "deliveries queued to the neighbour phase's hanging webhooks (default 10000)", integerAtLeast(100))
    .option(
      "--paced-rate <N>",
      "run the paced phase at N events/s instead of half the burst rate (to compare commits, or machines, at one rate)",
      integerAtLeast(1),
    )
    .action(() => undefined)
    .parse(argv, { from: "user" })
    .opts<{
      quick?: boolean;
      grown?: boolean;
      reseed?: boolean;
      seedEvents: number;
      events?: number;
      reps?: number;
      pacedRate?: number;
      neighbourBacklog?: number;
    }>();
  const quick = options.quick ?? false;
  const burst = options.events ?? (quick ? 2_000 : 5_000);
  const sizes: Sizes = {
    reps: options.reps ?? (quick ? 1 : 3),
    burst,
    ingest: burst,
    batch: quick ? 10_000 : 30_000,
    batchSize: 100,
    floor: burst,
    fanoutEvents: Math.round(burst / 5),
    pacedMs: quick ? 5_000 : 15_000,
    pacedRate: options.pacedRate,
    retries: quick ? 50 : 200,
    neighbourRate: 100,
    // Quick runs too: the p99 of 500 arrivals (5 s) was the few of one disk stall, in either run.
    neighbourMs: 10_000,
    neighbourBacklog: options.neighbourBacklog ?? 10_000,
    neighbourArrivalCapMs: quick ? 10_000 : 15_000,
  };
  return { quick, grown: options.grown ?? false, reseed: options.reseed ?? false, seedEvents: options.seedEvents, sizes };
}
