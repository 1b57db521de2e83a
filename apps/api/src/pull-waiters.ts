import { startListener } from "@mailhooks/db";
import { WORK_CHANNEL } from "@mailhooks/delivery-state";

/**
 * The waiting pulls of listen webhooks (docs/develop-locally.md, "Waiting for work"): a pull with
 * `wait` that finds nothing waits here, holding no PostgreSQL connection, until work of its
 * webhook is notified on WORK_CHANNEL (the work_items trigger, a released lease, an answer that
 * scheduled a retry), until something of it comes due (the pull's own timer), or until `wait` ends.
 * One LISTEN connection serves every waiting pull of the process; when it (re)connects, every
 * pull is woken, since notifications sent meanwhile are lost.
 */

/**
 * Waiting pulls one account may have at once in one API process (each process counts its own:
 * behind N processes, N times this). Past it a pull is answered 429 with Retry-After.
 */
const MAX_WAITING_PULLS_PER_ACCOUNT = 5;

/**
 * Waiting pulls one API process holds at once, whatever the accounts: each is an open connection
 * and a timer, a few KiB; past it a pull is answered 429 rather than held.
 */
const MAX_WAITING_PULLS = 1_000;

/** A held place among the waiting pulls; released when the pull answers. */
export interface WaitingPlace {
  release(): void;
}

export interface PullWaiters {
  /** A place for one waiting pull of `accountId`, or null when the account (or the process) holds all it may. */
  enter(accountId: string): WaitingPlace | null;
  /**
   * Resolves when work of `webhookId` is notified, after `ms`, or when `signal` aborts: true; at
   * close (the process stops), false: the pull answers with what it has.
   */
  wait(webhookId: string, ms: number, signal: AbortSignal): Promise<boolean>;
  /** Wakes every waiting pull and stops listening. */
  close(): Promise<void>;
}

/**
 * Waiting pulls woken by notifications of `databaseUrl`'s WORK_CHANNEL; without `databaseUrl`
 * (a test's app without a listener) only by their timers.
 */
export function createPullWaiters(options: { databaseUrl?: string } = {}): PullWaiters {
  const byAccount = new Map<string, number>();
  let total = 0;
  const waiting = new Map<string, Set<() => void>>();
  let closed = false;
  const wake = (webhookId?: string) => {
    const woken = webhookId === undefined ? [...waiting.values()].flatMap((s) => [...s]) : [...(waiting.get(webhookId) ?? [])];
    for (const resolve of woken) resolve();
  };
  const listener = options.databaseUrl
    ? startListener({
        databaseUrl: options.databaseUrl,
        channels: [WORK_CHANNEL],
        // `<queue_prefix> <webhook_id>`: a pull takes its webhook's work of every deployment.
        onNotification: (_channel, payload) => wake(payload.slice(payload.indexOf(" ") + 1)),
        onConnect: () => wake(),
      })
    : null;
  return {
    enter(accountId) {
      const held = byAccount.get(accountId) ?? 0;
      if (held >= MAX_WAITING_PULLS_PER_ACCOUNT || total >= MAX_WAITING_PULLS) return null;
      byAccount.set(accountId, held + 1);
      total++;
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          total--;
          const left = (byAccount.get(accountId) ?? 1) - 1;
          if (left === 0) byAccount.delete(accountId);
          else byAccount.set(accountId, left);
        },
      };
    },
    wait(webhookId, ms, signal) {
      if (closed) return Promise.resolve(false);
      if (signal.aborted) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          const set = waiting.get(webhookId);
          set?.delete(done);
          if (set?.size === 0) waiting.delete(webhookId);
          resolve(!closed);
        };
        const timer = setTimeout(done, ms);
        signal.addEventListener("abort", done);
        const set = waiting.get(webhookId) ?? new Set();
        set.add(done);
        waiting.set(webhookId, set);
      });
    },
    async close() {
      closed = true;
      wake();
      await listener?.close();
    },
  };
}
