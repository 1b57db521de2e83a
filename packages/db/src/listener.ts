import pg from "pg";

/**
 * A dedicated PostgreSQL connection that LISTENs on `channels` and calls `onNotification` for
 * each notification. It reconnects by itself (after `retryMs`) whenever the connection drops,
 * and calls `onConnect` each time it is listening again: notifications sent while it was not
 * listening are lost, so callers resynchronise there (a relay looks at its outbox, a cache
 * empties itself).
 */
export interface ListenerOptions {
  databaseUrl: string;
  channels: string[];
  onNotification: (channel: string, payload: string) => void;
  onConnect?: () => void;
  /** Pause before reconnecting, in ms. */
  retryMs?: number;
}

export function startListener(options: ListenerOptions): { close: () => Promise<void> } {
  let stopped = false;
  let current: pg.Client | null = null;
  let timer: NodeJS.Timeout | undefined;
  const connect = async () => {
    if (stopped) return;
    const client = new pg.Client({ connectionString: options.databaseUrl, connectionTimeoutMillis: 5_000 });
    let dropped = false;
    const drop = () => {
      if (dropped) return;
      dropped = true;
      if (current === client) current = null;
      client.end().catch(() => undefined);
      if (!stopped) timer = setTimeout(() => void connect(), options.retryMs ?? 1_000);
    };
    client.on("error", drop);
    client.on("end", drop);
    client.on("notification", (message) => options.onNotification(message.channel, message.payload ?? ""));
    try {
      await client.connect();
      for (const channel of options.channels) await client.query(`LISTEN "${channel.replaceAll('"', '""')}"`);
      current = client;
      options.onConnect?.();
    } catch {
      drop();
    }
  };
  void connect();
  return {
    close: async () => {
      stopped = true;
      clearTimeout(timer);
      await current?.end().catch(() => undefined);
    },
  };
}
