import http, { STATUS_CODES, type RequestListener } from "node:http";
import type { Duplex } from "node:stream";

/**
 * The API's HTTP server: Node's own limits on slow clients sized for this API, and the errors of
 * Node's HTTP parser (a malformed request line, headers too large, a request that timed out)
 * answered in the error shape of docs/api.md, "Errors" instead of Node's bodyless answers.
 */

export interface ServerTimeouts {
  /** HTTP_HEADERS_TIMEOUT_MS: the whole header block must arrive within this, in ms. */
  headersTimeoutMs: number;
  /** HTTP_REQUEST_TIMEOUT_MS: the whole request (headers and body) must arrive within this, in ms. */
  requestTimeoutMs: number;
  /** HTTP_KEEP_ALIVE_TIMEOUT_MS: an idle kept-alive connection is closed after this, in ms. */
  keepAliveTimeoutMs: number;
}

/** How often Node checks connections against headersTimeout and requestTimeout, in ms (its default is 30 s, which would let a stalled request live up to 30 s past its limit). */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

/** Node's parser error codes that are answered with their own status; the rest are 400. */
const STATUS_OF: Record<string, number> = {
  HPE_HEADER_OVERFLOW: 431,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
  HPE_HEADERS_TIMEOUT: 408,
};
const CODE_OF: Record<number, string> = { 400: "invalid_json", 408: "request_timeout", 431: "headers_too_large" };
const MESSAGE_OF: Record<number, string> = {
  400: "the request is not valid HTTP and could not be read",
  408: "the request did not arrive in time",
  431: "the request's headers are too large",
};

/** A whole HTTP/1.1 answer in the error shape, with `Connection: close`: what a clientError writes on the raw socket. */
export function clientErrorResponse(errorCode: string | undefined): string {
  const status = STATUS_OF[errorCode ?? ""] ?? 400;
  const body = JSON.stringify({ error: { code: CODE_OF[status], message: MESSAGE_OF[status] } });
  return [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    "Content-Type: application/json; charset=utf-8",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "Cache-Control: no-store",
    "Connection: close",
    "",
    body,
  ].join("\r\n");
}

/**
 * An http.Server for `app` with the given timeouts (headersTimeout is kept at most
 * requestTimeout, as Node requires) and a `clientError` handler that answers in the error shape,
 * then closes the connection. A connection that is already broken, or whose answer has begun, is
 * only destroyed.
 */
export function createApiServer(app: RequestListener, timeouts: ServerTimeouts): http.Server {
  const server = http.createServer(
    {
      headersTimeout: Math.min(timeouts.headersTimeoutMs, timeouts.requestTimeoutMs),
      requestTimeout: timeouts.requestTimeoutMs,
      keepAliveTimeout: timeouts.keepAliveTimeoutMs,
      connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
    },
    app,
  );
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (error.code === "ECONNRESET" || !socket.writable || answering) {
      socket.destroy();
      return;
    }
    socket.end(clientErrorResponse(error.code));
  });
  return server;
}
