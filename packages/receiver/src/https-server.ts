import https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An HTTPS server on loopback with a local certificate (see ensureLocalCertificate): what every
 * receiver of the tests, the benchmark and the demo listens with. Senders reach it at
 * `https://localhost:<port>` and trust it through NODE_EXTRA_CA_CERTS.
 */
export interface HttpsListener {
  server: https.Server;
  port: number;
  /** `https://localhost:<port><path>`. */
  url: (path: string) => string;
  /** Closes every connection, idle or not, then the server. */
  close: () => Promise<void>;
}

export interface ListenOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** How long an idle keep-alive connection stays open, in ms (Node's default: 5 s). */
  keepAliveTimeoutMs?: number;
}

/** Starts `handler` behind HTTPS with `certificate`; resolves once it listens. */
export async function listenHttps(
  certificate: { cert: string; key: string },
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  options: ListenOptions = {},
): Promise<HttpsListener> {
  const server = https.createServer(
    {
      cert: certificate.cert,
      key: certificate.key,
      ...(options.keepAliveTimeoutMs === undefined ? {} : { keepAliveTimeout: options.keepAliveTimeoutMs }),
    },
    handler,
  );
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    url: (path) => `https://localhost:${port}${path}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
