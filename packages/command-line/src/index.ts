import { Command, type CommanderError } from "commander";
import type { z } from "zod";

/**
 * The command lines of the project's commands (docs/operations.md, "Commands"), parsed by commander:
 * `--help` prints the usage, an example and the environment the command reads, and exits 0; an
 * unknown option, a missing or extra argument prints the error and the usage on stderr and
 * exits 2 (the usual code of a usage error). Used by every entry point: apps/cli (keys, replay,
 * db:migrate), the API and dispatcher processes, `npm start`, the demo and the benchmark. The two
 * service processes start with `startService` (`@mailhooks/command-line/service`).
 */

export { Command, InvalidArgumentError, Option } from "commander";

/** Exit code of a command-line usage error. */
export const USAGE_ERROR = 2;

export interface CommandSpec {
  /** How the command is typed, e.g. `npm run -s keys --`. */
  name: string;
  /** One or two sentences: what it does. */
  description: string;
  /** Complete command lines, shown under "Examples:". */
  examples: string[];
  /** Environment variables it reads, e.g. a schema of @mailhooks/config: listed under --help with their defaults. */
  environment?: z.ZodObject;
  /** Other variables (name -> meaning), listed after those of `environment`. */
  moreEnvironment?: Record<string, string>;
}

/**
 * A commander program that exits 0 after --help and 2 after a usage error. Subcommands made
 * with `.command()` inherit this behaviour; give each its own examples with `withExamples`.
 */
export function createCommand(spec: CommandSpec): Command {
  const program = new Command(spec.name)
    .description(spec.description)
    .helpOption("-h, --help", "show this help and exit")
    .showHelpAfterError()
    .exitOverride((error: CommanderError) => {
      process.exit(error.exitCode === 0 ? 0 : USAGE_ERROR);
    });
  withExamples(program, spec.examples);
  const environment = environmentLines(spec);
  if (environment.length > 0) program.addHelpText("after", `\nEnvironment:\n${environment.join("\n")}`);
  return program;
}

/** Adds an "Examples:" section to `command`'s help. */
export function withExamples<C extends Command>(command: C, examples: string[]): C {
  if (examples.length > 0)
    command.addHelpText("after", `\nExample${examples.length > 1 ? "s" : ""}:\n${examples.map((e) => `  $ ${e}`).join("\n")}`);
  return command;
}

/** `  NAME  (default: VALUE)` for each variable of the spec, in the schema's order. */
function environmentLines(spec: CommandSpec): string[] {
  const entries: [string, string][] = Object.entries(spec.environment?.shape ?? {}).map(([name, field]) => [
    name,
    defaultOf(field as z.ZodType),
  ]);
  entries.push(...Object.entries(spec.moreEnvironment ?? {}));
  const width = Math.max(0, ...entries.map(([name]) => name.length));
  return entries.map(([name, text]) => `  ${name.padEnd(width)}  ${text}`);
}

/** "default: X" of a zod field with a default, else "optional" or "required". */
function defaultOf(field: z.ZodType): string {
  const def = field._zod.def as { type: string; defaultValue?: unknown };
  if (def.type === "default") {
    const value = def.defaultValue;
    return `default: ${Array.isArray(value) ? value.join(",") : String(value)}`;
  }
  return def.type === "optional" ? "optional" : "required";
}
