import net from "node:net";

/**
 * A TCP proxy on a free loopback port in front of `target`, that can "cut" the link (every piped
 * connection is reset and new ones are reset as soon as accepted, as when a database host
 * disappears) and "restore" it, or "freeze" it (every connection stays open but nothing passes
 * either way, and new ones are accepted and left waiting: a server that stopped answering, a
 * half-open link) and "thaw" it. Processes whose connection string points at the proxy lose
 * their service; everything else keeps it.
 */
export interface TcpProxy {
  port: number;
  cut: () => void;
  restore: () => void;
  freeze: () => void;
  thaw: () => void;
  /** Connections accepted so far (piped or refused). */
  accepted: () => number;
  close: () => Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let isCut = false;
  let isFrozen = false;
  let accepted = 0;
  const pairs = new Set<[net.Socket, net.Socket]>();
  /** Connections accepted while frozen, waiting for a thaw. */
  const held = new Set<net.Socket>();

  const pipe = (a: net.Socket, b: net.Socket) => {
    a.pipe(b);
    b.pipe(a);
  };
  const server = net.createServer((client) => {
    accepted++;
    if (isCut) {
      client.resetAndDestroy();
      return;
    }
    if (isFrozen) {
      client.pause();
      held.add(client);
      client.on("error", () => held.delete(client)).on("close", () => held.delete(client));
      return;
    }
    connect(client);
  });
  const connect = (client: net.Socket) => {
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
    pipe(client, upstream);
  };
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
    freeze: () => {
      isFrozen = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    thaw: () => {
      isFrozen = false;
      for (const [client, upstream] of pairs) pipe(client, upstream);
      for (const client of held) {
        held.delete(client);
        client.resume();
        connect(client);
      }
    },
    accepted: () => accepted,
    close: () =>
      new Promise((resolve) => {
        cutAll();
        for (const client of held) client.destroy();
        server.close(() => resolve());
      }),
  };
}
