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
  /**
   * Loses the answer to one PostgreSQL statement: the next connection whose client sends bytes
   * containing `marker` (e.g. a prepared statement's name, or `COMMIT`) gets nothing more from the
   * server; once the server has sent its ReadyForQuery for that statement (it has run, and
   * committed when it was a transaction's last), both sides are closed, as when a link fails
   * right after the server answered. Resolves when that happened.
   */
  loseReplyTo: (marker: string) => Promise<void>;
  close: () => Promise<void>;
}

/**
 * `replyDelayMs`: every byte the server sends reaches the client this much later, in order (a far
 * link: the server has acted on a command before its client hears the answer); what the client
 * sends is not delayed. Not for a proxy that is frozen.
 */
export async function startTcpProxy(target: { host: string; port: number }, options: { replyDelayMs?: number } = {}): Promise<TcpProxy> {
  let isCut = false;
  let isFrozen = false;
  let accepted = 0;
  /** An armed loseReplyTo: its marker and what to call once the reply was lost. */
  let loseReply: { marker: Buffer; done: () => void } | null = null;
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
    if (options.replyDelayMs) {
      const delayMs = options.replyDelayMs;
      client.pipe(upstream);
      // Timers of one delay fire in the order they were set: the bytes stay in order.
      upstream.on("data", (chunk: Buffer) => void setTimeout(() => client.writable && client.write(chunk), delayMs));
    } else pipe(client, upstream);
    watchForMarker(client, upstream, drop);
  };

  /**
   * Sees what `client` sends (after the pipe has passed it on); when an armed marker goes by,
   * stops passing the server's bytes and reads its messages (type byte, int32 length) until
   * ReadyForQuery ('Z'), then drops the pair.
   */
  const watchForMarker = (client: net.Socket, upstream: net.Socket, drop: () => void) => {
    let tail = Buffer.alloc(0);
    client.on("data", (chunk: Buffer) => {
      if (!loseReply) return;
      const seen = Buffer.concat([tail, chunk]);
      tail = seen.subarray(Math.max(0, seen.length - loseReply.marker.length + 1));
      if (!seen.includes(loseReply.marker)) return;
      const { done } = loseReply;
      loseReply = null;
      upstream.unpipe(client);
      // The client waited for the previous ReadyForQuery before sending: the server's next bytes start a message.
      let reply = Buffer.alloc(0);
      upstream.on("data", (data: Buffer) => {
        reply = Buffer.concat([reply, data]);
        for (let at = 0; at + 5 <= reply.length;) {
          const end = at + 1 + reply.readInt32BE(at + 1);
          if (end > reply.length) break;
          if (reply[at] === 0x5a) {
            drop();
            done();
            return;
          }
          at = end;
        }
      });
      // unpipe paused it.
      upstream.resume();
    });
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
    loseReplyTo: (marker) =>
      new Promise<void>((resolve) => {
        loseReply = { marker: Buffer.from(marker, "utf8"), done: resolve };
      }),
    close: () =>
      new Promise((resolve) => {
        cutAll();
        for (const client of held) client.destroy();
        server.close(() => resolve());
      }),
  };
}
