import net from "node:net";

/** Whether anything accepts TCP connections at a service URL, before the demo relies on it. */

/** Errors that mean "nothing is there", as opposed to a wrong host name or a refused login. */
const NOTHING_THERE = new Set(["ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ECONNRESET"]);

/**
 * True when something accepts a TCP connection at `host:port` within `timeoutMs`; false when
 * nothing answers. Other errors (an unknown host) are thrown: starting a local server would
 * hide a mistyped URL. Only TCP is tried, so a wrong password or a missing database is left to
 * the client that reports it properly (the migration creates a missing database).
 */
export function answers(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    const done = (result: boolean | Error) => {
      socket.destroy();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", (error: NodeJS.ErrnoException) => {
      if (NOTHING_THERE.has(error.code ?? "")) done(false);
      else done(new Error(`cannot reach ${host}:${port}: ${error.message}`));
    });
  });
}

/** Host and port of a postgresql:// or redis:// URL, with the protocol's default port. */
export function hostAndPort(url: URL, defaultPort: number): { host: string; port: number } {
  // WHATWG URLs keep IPv6 hosts in brackets; net.connect wants them bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost";
  return { host, port: url.port ? Number(url.port) : defaultPort };
}
