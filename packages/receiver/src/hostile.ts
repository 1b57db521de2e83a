import net, { type AddressInfo, type Socket } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import { listenHttps } from "./https-server.js";

/**
 * Receivers that misbehave on purpose, for the tests of the dispatcher's HTTP client and the
 * chaos tests: an HTTPS server (a local certificate, e.g. testCertificate(), trusted through
 * NODE_EXTRA_CA_CERTS) whose answer depends on the first segment of the path, and a TCP listener that accepts connections and never speaks
 * TLS. Every request is answered the same way whatever its body or signature.
 *
 * | path           | answer                                                                  |
 * |----------------|-------------------------------------------------------------------------|
 * | /ok            | 200 `{"received":true}`                                                  |
 * | /endless       | 200 with Content-Length 1 GiB, streamed as fast as the client reads      |
 * | /big           | 200 with a complete 1 MiB body                                           |
 * | /trickle       | 200, then one body byte per second (chunked) for an hour                 |
 * | /late/MS       | waits MS ms, then answers as /trickle                                    |
 * | /silent        | nothing: the status line never comes                                    |
 * | /slow-headers  | the status line, then one header byte every 100 ms, forever              |
 * | /huge-header   | 200 with a 1 MiB header (/huge-header/NNN: status NNN)                  |
 * | /status/NNN    | status NNN with the body `answer NNN: upstream exploded`                 |
 * | /invalid-utf8  | 200 with a body that is not valid UTF-8 (see INVALID_UTF8_BODY)         |
 * | /redirect      | 302 to /ok                                                              |
 */
export interface HostileReceiver {
  /** `https://localhost:<port><path>` of the HTTPS server. */
  url: (path: string) => string;
  /** A URL on the listener that accepts TCP and never completes the TLS handshake. */
  stalledHandshakeUrl: (path: string) => string;
  /** Paths requested so far, in order. */
  requests: string[];
  /** TLS connections the HTTPS server accepted so far. */
  connections: () => number;
  /** TLS connections of the HTTPS server still open. */
  openConnections: () => number;
  /** TCP connections the stalling listener accepted so far. */
  stalledConnections: () => number;
  /** TCP connections of the stalling listener still open (handshakes in progress). */
  openStalledConnections: () => number;
  /** Body bytes written so far for requests whose path starts with `prefix`. */
  bodyBytesSent: (prefix: string) => number;
  close: () => Promise<void>;
}

export const GIB = 1024 ** 3;
export const MIB = 1024 ** 2;
/** `hi`, two invalid bytes, an invalid two-byte sequence, then `ok`. */
export const INVALID_UTF8_BODY = Buffer.from([0x68, 0x69, 0xff, 0xfe, 0xc3, 0x28, 0x6f, 0x6b]);

const CHUNK = Buffer.alloc(64 * 1024, "a");

/** Writes `total` bytes of `a` to `res`, as fast as the client reads; stops when it goes away. */
function stream(res: ServerResponse, total: number, count: (n: number) => void): void {
  let sent = 0;
  const pump = () => {
    while (sent < total && !res.destroyed) {
      const piece = total - sent >= CHUNK.length ? CHUNK : CHUNK.subarray(0, total - sent);
      sent += piece.length;
      count(piece.length);
      if (!res.write(piece)) return void res.once("drain", pump);
    }
    if (!res.destroyed) res.end();
  };
  pump();
}

/** Writes `bytes` one at a time every `everyMs` to `target`, until it closes. */
function trickle(
  target: { write: (b: string) => unknown; destroyed: boolean; once: (e: "close", f: () => void) => unknown },
  bytes: string,
  everyMs: number,
): void {
  let i = 0;
  const timer = setInterval(() => {
    if (target.destroyed) return clearInterval(timer);
    target.write(bytes[i++ % bytes.length]);
  }, everyMs);
  target.once("close", () => clearInterval(timer));
}

/** Starts both listeners on free loopback ports, the HTTPS one with `certificate`. */
export async function startHostileReceiver(certificate: { cert: string; key: string }): Promise<HostileReceiver> {
  const requests: string[] = [];
  const sentByPath = new Map<string, number>();
  const open = new Set<Socket>();
  let connections = 0;

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const urlPath = (req.url ?? "/").split("?")[0];
    requests.push(urlPath);
    const kind = urlPath.split("/")[1] ?? "";
    const count = (n: number) => sentByPath.set(urlPath, (sentByPath.get(urlPath) ?? 0) + n);
    res.on("error", () => undefined);
    switch (kind) {
      case "ok":
        res.writeHead(200, { "content-type": "application/json" }).end('{"received":true}');
        return;
      case "endless":
        res.writeHead(200, { "content-type": "text/plain", "content-length": String(GIB) });
        return stream(res, GIB, count);
      case "big":
        res.writeHead(200, { "content-type": "text/plain", "content-length": String(MIB) });
        return stream(res, MIB, count);
      case "trickle":
        res.writeHead(200, { "content-type": "text/plain" });
        res.flushHeaders();
        return trickle(res, "trickle ", 1_000);
      case "late": {
        const timer = setTimeout(
          () => {
            res.writeHead(200, { "content-type": "text/plain" });
            res.flushHeaders();
            trickle(res, "late ", 1_000);
          },
          Number(urlPath.split("/")[2]),
        );
        res.once("close", () => clearTimeout(timer));
        return;
      }
      case "silent":
        return;
      case "slow-headers":
        // Raw bytes on the socket: ServerResponse would send whole header blocks only.
        req.socket.write("HTTP/1.1 200 OK\r\nX-Slow: ");
        return trickle(req.socket, "s", 100);
      case "huge-header": {
        const status = /^\d{3}$/.test(urlPath.split("/")[2] ?? "") ? urlPath.split("/")[2] : "200";
        req.socket.write(`HTTP/1.1 ${status} Whatever\r\nX-Huge: ${"h".repeat(MIB)}\r\nContent-Length: 0\r\n\r\n`);
        return;
      }
      case "status": {
        const status = Number(urlPath.split("/")[2]);
        res.writeHead(status, { "content-type": "text/plain" }).end(`answer ${status}: upstream exploded`);
        return;
      }
      case "invalid-utf8":
        res.writeHead(200, { "content-type": "text/plain" }).end(INVALID_UTF8_BODY);
        return;
      case "redirect":
        res.writeHead(302, { location: "/ok" }).end("see /ok");
        return;
      default:
        res.writeHead(404).end();
    }
  };
  const listener = await listenHttps(certificate, (req, res) => {
    // Answer once the request is in, as a real receiver would (and so that keep-alive works).
    req.resume();
    req.once("end", () => handle(req, res));
  });
  const server = listener.server;
  server.on("secureConnection", (socket: Socket) => {
    connections++;
    open.add(socket);
    socket.on("error", () => undefined);
    socket.once("close", () => open.delete(socket));
  });
  // A hostile peer may leave halfway; that is no failure of the receiver.
  server.on("tlsClientError", () => undefined);

  const stalled = new Set<Socket>();
  let stalledCount = 0;
  const stallServer = net.createServer((socket) => {
    stalledCount++;
    stalled.add(socket);
    socket.on("error", () => undefined);
    socket.once("close", () => stalled.delete(socket));
  });

  await new Promise<void>((resolve) => stallServer.listen(0, "127.0.0.1", resolve));
  const stallPort = (stallServer.address() as AddressInfo).port;

  return {
    url: listener.url,
    stalledHandshakeUrl: (p) => `https://localhost:${stallPort}${p}`,
    requests,
    connections: () => connections,
    openConnections: () => open.size,
    stalledConnections: () => stalledCount,
    openStalledConnections: () => stalled.size,
    bodyBytesSent: (prefix) => [...sentByPath].filter(([p]) => p.startsWith(prefix)).reduce((sum, [, n]) => sum + n, 0),
    close: async () => {
      for (const socket of stalled) socket.destroy();
      for (const socket of open) socket.destroy();
      await Promise.all([listener.close(), new Promise((r) => stallServer.close(r))]);
    },
  };
}
