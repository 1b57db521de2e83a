/**
 * `npm run bench:profile-summary [-- [--top N] [file.cpuprofile ...]]`: the functions with the
 * most self time in V8 CPU profiles (BENCH_PROFILE=1 npm run bench writes them to .tmp/profiles,
 * one per API and dispatcher process), grouped by package too, so that bench/README.md can quote
 * where the time goes. Without files: the newest profile of each process (api, api-batch,
 * dispatcher) in .tmp/profiles.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createCommand, InvalidArgumentError } from "@mailhooks/command-line";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SPECIAL = new Set(["(idle)", "(program)", "(garbage collector)", "(root)"]);

/**
 * The longest interval between two samples counted as the sampled frame's time, in µs. V8's
 * sampler ticks every 1 ms while the process runs (`--cpu-prof-interval`'s default); a gap fifty
 * times that means the process was not running (the bench stops the dispatcher with SIGSTOP
 * during the ingest phases), and the rest of the gap is reported as "(stopped)", not as the
 * frame's: a pause landing in one function would otherwise make it the top of the profile.
 */
export const STOPPED_AFTER_US = 50_000;

/** Where a frame's code lives: a package of node_modules, a workspace, Node itself. */
function ownerOf(url: string): string {
  if (!url) return "(native / V8)";
  if (url.startsWith("node:")) return "node: internals";
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1];
  const workspace = /\/(apps|packages)\/([^/]+)\//.exec(url);
  return workspace ? `${workspace[1]}/${workspace[2]}` : path.basename(url);
}

const shortUrl = (url: string) =>
  url
    .replace(/^file:\/\//, "")
    .replace(`${ROOT}/`, "")
    .replace(/^.*node_modules\//, "");

/**
 * Self time per function (`functions`, keyed "name  file:line") and per package (`owners`), and of
 * V8's special frames and "(stopped)" (`special`), all in µs, with the profile's whole span
 * (`totalUs`). A sample's time is the interval to the next sample, at most STOPPED_AFTER_US.
 */
export function summarize(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let stoppedUs = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    stoppedUs += Math.max(0, us - STOPPED_AFTER_US);
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.min(us, STOPPED_AFTER_US));
  });
  const totalUs = profile.endTime - profile.startTime;
  const functions = new Map<string, { us: number; owner: string }>();
  const owners = new Map<string, number>();
  const special = new Map<string, number>([["(stopped)", stoppedUs]]);
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    if (SPECIAL.has(frame.functionName)) {
      special.set(frame.functionName, (special.get(frame.functionName) ?? 0) + us);
      continue;
    }
    const key = `${frame.functionName || "(anonymous)"}  ${frame.url ? `${shortUrl(frame.url)}:${frame.lineNumber + 1}` : "(native)"}`;
    const owner = ownerOf(frame.url);
    const entry = functions.get(key) ?? { us: 0, owner };
    entry.us += us;
    functions.set(key, entry);
    owners.set(owner, (owners.get(owner) ?? 0) + us);
  }
  return { totalUs, special, functions, owners };
}

/** Which process a profile came from: by its name (bench/processes.ts names them), else its frames. */
function kindOf(file: string, profile: CpuProfile): string {
  const named = /^(api-batch|api|dispatcher)\./.exec(path.basename(file));
  if (named) return named[1];
  const urls = profile.nodes.map((n) => n.callFrame.url);
  if (urls.some((u) => u.includes("apps/api/"))) return "api";
  if (urls.some((u) => u.includes("apps/dispatcher/"))) return "dispatcher";
  return "other";
}

async function newestPerKind(dir: string): Promise<string[]> {
  const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith(".cpuprofile")).map((f) => path.join(dir, f));
  const dated = await Promise.all(files.map(async (f) => ({ f, at: (await stat(f)).mtimeMs })));
  const newest = new Map<string, { f: string; at: number }>();
  for (const d of dated) {
    const kind = kindOf(d.f, JSON.parse(await readFile(d.f, "utf8")) as CpuProfile);
    if (kind !== "other" && (newest.get(kind)?.at ?? 0) < d.at) newest.set(kind, d);
  }
  return [...newest.values()].map((d) => d.f);
}

const pct = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1).padStart(5)} %`;
const ms = (us: number) => `${(us / 1000).toFixed(0).padStart(7)} ms`;

async function main() {
  const program = createCommand({
    name: "npm run bench:profile-summary --",
    description:
      "The top self-time functions and the self time by package of V8 CPU profiles: the files named, else the newest profile of each process (api, api-batch, dispatcher) in .tmp/profiles, which BENCH_PROFILE=1 npm run bench writes.",
    examples: [
      "npm run bench:profile-summary",
      "npm run bench:profile-summary -- --top 40 .tmp/profiles/api.20261123T010000.1234.cpuprofile",
    ],
  })
    .argument("[files...]", ".cpuprofile files")
    .option(
      "--top <N>",
      "how many functions to list",
      (value) => {
        if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError("must be a positive integer");
        return Number(value);
      },
      25,
    )
    .action(() => undefined)
    .parse(process.argv);
  const top = program.opts<{ top: number }>().top;
  const named = program.args;
  const files = named.length ? named : await newestPerKind(path.join(ROOT, ".tmp/profiles"));
  if (files.length === 0) throw new Error("no profile: run BENCH_PROFILE=1 npm run bench first, or name .cpuprofile files");
  for (const file of files) {
    const profile = JSON.parse(await readFile(file, "utf8")) as CpuProfile;
    const { totalUs, special, functions, owners } = summarize(profile);
    const stopped = special.get("(stopped)") ?? 0;
    const busy = totalUs - stopped - (special.get("(idle)") ?? 0);
    console.log(`\n${kindOf(file, profile)}: ${path.relative(process.cwd(), file)}`);
    console.log(
      `  ${(totalUs / 1e6).toFixed(1)} s profiled (stopped ${(stopped / 1e6).toFixed(1)} s), busy ${pct(busy, totalUs - stopped)} of the rest; of the busy time: garbage collector ${pct(special.get("(garbage collector)") ?? 0, busy)}, (program) ${pct(special.get("(program)") ?? 0, busy)}`,
    );
    console.log(`\n  top ${top} functions by self time (share of the busy time)`);
    for (const [key, { us }] of [...functions].sort((a, b) => b[1].us - a[1].us).slice(0, top))
      console.log(`  ${ms(us)} ${pct(us, busy)}  ${key}`);
    console.log("\n  self time by package");
    for (const [owner, us] of [...owners].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${ms(us)} ${pct(us, busy)}  ${owner}`);
  }
}

// Run as a command (npm run bench:profile-summary), not when a test imports summarize.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  main().catch((error) => {
    console.error(`profile-summary: ${(error as Error).message}`);
    process.exit(1);
  });
