import { Writable } from "node:stream";
import winston from "winston";
import { configureLogger, getLogger } from "./index.js";

/**
 * Runs `fn` with every logger of the process at level `silly` in JSON, its lines captured (and
 * kept off the console), and returns them: for tests that check what would have been logged.
 * The logger is left at `after` (level and format) when `fn` ends.
 */
export async function captureLogs(
  fn: () => unknown,
  after: { level: string; format: "json" | "pretty" } = { level: "warn", format: "pretty" },
): Promise<string> {
  const lines: string[] = [];
  const transport = new winston.transports.Stream({
    stream: new Writable({
      write(chunk, _encoding, callback) {
        lines.push(String(chunk));
        callback();
      },
    }),
  });
  // Every module's logger is a child of the one root logger.
  const root = Object.getPrototypeOf(getLogger("capture")) as winston.Logger;
  configureLogger({ level: "silly", format: "json" });
  const consoles = root.transports.filter((t) => t instanceof winston.transports.Console);
  for (const t of consoles) t.silent = true;
  root.add(transport);
  try {
    await fn();
  } finally {
    root.remove(transport);
    for (const t of consoles) t.silent = false;
    configureLogger(after);
  }
  return lines.join("\n");
}
