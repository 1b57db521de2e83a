import type { ProcessExit, StartedProcess } from "./process.js";

/**
 * Waits until `p` has printed `pattern` (a process started with output `collect` or `prefix`;
 * with `keepLast`, within the output it still keeps).
 * @throws Error with its output when it exits first, or after `timeoutMs`.
 */
export async function waitForOutput(p: StartedProcess, pattern: string | RegExp, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const found = () => (typeof pattern === "string" ? p.output().includes(pattern) : pattern.test(p.output()));
  while (!found()) {
    if (!p.running()) throw new Error(`${p.name} exited before printing ${pattern}; output:\n${p.output()}`);
    if (Date.now() > deadline) throw new Error(`${p.name} did not print ${pattern} within ${timeoutMs} ms; output:\n${p.output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Waits for `p` to exit.
 * @throws Error with its output after `timeoutMs`.
 */
export async function waitForExit(p: StartedProcess, timeoutMs: number): Promise<ProcessExit> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${p.name} did not exit within ${timeoutMs} ms; output:\n${p.output()}`)), timeoutMs);
  });
  try {
    return await Promise.race([p.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `url` (every 200 ms) until it answers 2xx, e.g. a started API's /readyz.
 * @throws Error after `timeoutMs` (default 120 s: tsx compiles the sources at start, which on a
 * busy two-core laptop takes well over 30 s for the API and the dispatcher).
 */
export async function waitForHttp(url: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not become ready within ${timeoutMs} ms`);
}
