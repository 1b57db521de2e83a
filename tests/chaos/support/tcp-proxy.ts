import net from "node:net";

/**
 * A TCP proxy on a free loopback port in front of `target`, that can "cut" the link (every piped
 * connection is reset and new ones are reset as soon as accepted, as when a database host
 * disappears) and "restore" it. Processes whose connection string points at the proxy lose
 * their service; everything else keeps it.
 */
export interface TcpProxy {
  port: number;
  cut: () => void;
  restore: () => void;
  /** Connections accepted so far (piped or refused). */
  accepted: () => number;
  close: () => Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let isCut = false;
  let accepted = 0;
  const pairs = new Set<[net.Socket, net.Socket]>();

  const server = net.createServer((client) => {
    accepted++;
    if (isCut) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));

  const cutAll = () => {
    for (const [client, upstream] of pairs) {
      client.resetAndDestroy();
      upstream.destroy();
    }
    pairs.clear();
  };

  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => {
      isCut = true;
      cutAll();
    },
    restore: () => {
      isCut = false;
    },
    accepted: () => accepted,
    close: () =>
      new Promise((resolve) => {
        cutAll();
        server.close(() => resolve());
      }),
  };
}
