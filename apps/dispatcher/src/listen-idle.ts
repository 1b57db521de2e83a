import type pg from "pg";
import { disableIdleListenWebhooks } from "@mailhooks/delivery-state";
import type { Logger } from "@mailhooks/logger";

/**
 * LISTEN_IDLE_HOURS (docs/develop-locally.md): every dispatcher looks, now and then, for listen
 * webhooks nobody has pulled (nor changed) for that long, and disables them with
 * `disabled_reason: "idle"`, cancelling what waited (disableIdleListenWebhooks). Two dispatchers
 * looking at once disable each webhook once (its update is conditional).
 */

/** The longest pause between two looks, in ms: one indexed query of the few listen webhooks. */
export const IDLE_CHECK_EVERY_MS = 60_000;

/**
 * Starts the looks for listen webhooks idle `idleMs` (0: never), every IDLE_CHECK_EVERY_MS or a
 * quarter of `idleMs` if shorter, so that one is disabled at most a quarter of its idle time late.
 */
export function startIdleListenCheck(options: { pool: pg.Pool; idleMs: number; queuePrefix: string; logger: Logger }): {
  close: () => void;
} {
  if (options.idleMs <= 0) return { close: () => undefined };
  let running = false;
  const look = () => {
    if (running) return;
    running = true;
    disableIdleListenWebhooks(options.pool, options.idleMs, options.queuePrefix)
      .then((disabled) => {
        if (disabled > 0) options.logger.info("listen webhooks disabled: not pulled for LISTEN_IDLE_HOURS", { disabled });
      })
      .catch((error: Error) => options.logger.warn("could not look for idle listen webhooks; trying again later", { error: error.message }))
      .finally(() => (running = false));
  };
  const timer = setInterval(look, Math.min(IDLE_CHECK_EVERY_MS, options.idleMs / 4));
  timer.unref();
  return { close: () => clearInterval(timer) };
}
