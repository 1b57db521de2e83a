/**
 * The loop of `npm run -s listen` (docs/develop-locally.md): pulls a listen webhook's pending
 * deliveries one at a time (GET /v1/webhooks/{id}/pending?wait=25&limit=1), forwards each to the
 * local receiver (forward.ts) and answers with what came back (POST
 * /v1/webhooks/{id}/pending/{delivery_id}), through the typed client (@mailhooks/api-client).
 * One item at a time keeps the order (oldest first) and answers each well within the 60 s after
 * which the API hands an unanswered item out again.
 */
import type { ApiClient, Schemas } from "@mailhooks/api-client";
import { forward, type Forwarded } from "./forward.js";

type Pending = Schemas["PendingDelivery"];

/** How long an item stays handed out to its pull before the API hands it out again, in ms (docs/api.md). */
const PULL_VISIBILITY_MS = 60_000;
/** The wait of each pull, in seconds (the API allows up to 30). */
const PULL_WAIT_S = 25;
/** A pull that has not answered this long after its wait is taken as lost, in ms. */
const PULL_SLACK_MS = 15_000;
/** An answer call's own deadline, in ms. */
const ANSWER_TIMEOUT_MS = 10_000;

export interface ListenOptions {
  api: ApiClient;
  webhookId: string;
  forwardTo: string;
  /** Deadline of each forward, in ms: below PULL_VISIBILITY_MS so that an item is answered before it is handed out again. */
  forwardTimeoutMs: number;
  /** Prints one line on stdout. */
  print: (line: string) => void;
  /** Prints one line on stderr. */
  warn: (line: string) => void;
}

/** A refusal of the API that no retry mends (an unknown key or webhook, a push or disabled webhook). */
export class ListenRefused extends Error {
  override name = "ListenRefused";
}

/**
 * Pulls, forwards and answers until `stop` fires, then returns. An unreachable API, a 5xx or a 429
 * is waited out with a growing delay (0.5 s doubling up to 15 s, or the Retry-After), with a line
 * on stderr each time and one when the API answers again. When `stop` fires the pull in flight is
 * dropped (what it held is handed out again after 60 s); the forward in flight runs on until
 * `abandon` fires and is answered if it finishes first, else left unanswered: no answer is ever
 * made of a forward that did not end.
 * @throws ListenRefused on a 401, 403, 404 or 409 of a pull
 */
export async function runListen(options: ListenOptions, stop: AbortSignal, abandon: AbortSignal): Promise<void> {
  const { api, webhookId, warn } = options;
  let failures = 0;
  while (!stop.aborted) {
    let items: Pending[];
    try {
      const signal = AbortSignal.any([stop, AbortSignal.timeout(PULL_WAIT_S * 1000 + PULL_SLACK_MS)]);
      const res = await api.GET("/v1/webhooks/{id}/pending", {
        params: { path: { id: webhookId }, query: { wait: PULL_WAIT_S, limit: 1 } },
        signal,
      });
      if (res.error !== undefined) {
        const status = res.response.status;
        const message = `${status} ${res.error.error.code}: ${res.error.error.message}`;
        if ([401, 403, 404, 409].includes(status)) throw new ListenRefused(message);
        throw Object.assign(new Error(message), { retryAfterS: Number(res.response.headers.get("retry-after")) || 0 });
      }
      items = res.data.data;
    } catch (error) {
      if (error instanceof ListenRefused) throw error;
      if (stop.aborted) break;
      failures++;
      const retryAfterMs = ((error as { retryAfterS?: number }).retryAfterS ?? 0) * 1000;
      const delayMs = Math.max(retryAfterMs, Math.min(500 * 2 ** (failures - 1), 15_000));
      warn(`listen: the API did not answer the pull (${describe(error)}); trying again in ${(delayMs / 1000).toFixed(1)} s`);
      await sleep(delayMs, stop);
      continue;
    }
    if (failures > 0) warn("listen: the API answers again; listening");
    failures = 0;
    for (const item of items) await handle(options, item, abandon);
  }
}

/** Forwards `item` and answers with the outcome; prints its line. */
async function handle(options: ListenOptions, item: Pending, abandon: AbortSignal): Promise<void> {
  const pulledAt = Date.now();
  const label = `${kindOf(item.body)} ${item.event_id ?? item.delivery_id}${item.trigger === "initial" ? "" : ` (${item.trigger}${item.trigger === "retry" ? ` ${item.attempt}` : ""})`}`;
  const outcome = await forward(options.forwardTo, item, options.forwardTimeoutMs, abandon);
  if (outcome === "abandoned") {
    options.print(`${clock()} ${label} left unanswered (stopped): handed out again after 60 s`);
    return;
  }
  const shown = "status" in outcome ? String(outcome.status) : `${outcome.error} (${outcome.detail})`;
  const answered = await answer(options, item.delivery_id, outcome, pulledAt + PULL_VISIBILITY_MS, abandon);
  options.print(`${clock()} ${label} ${shown} ${outcome.durationMs} ms${answered === "recorded" ? "" : ` [${answered}]`}`);
}

/**
 * Posts the answer to `deliveryId`, trying again on a failed call (an answer repeated is the same
 * row) until `deadline` (epoch ms, when the item is handed out again anyway) or `abandon`.
 * @returns "recorded", or why it is not
 */
async function answer(
  options: ListenOptions,
  deliveryId: string,
  outcome: Forwarded,
  deadline: number,
  abandon: AbortSignal,
): Promise<string> {
  const body =
    "status" in outcome
      ? { status: outcome.status, duration_ms: outcome.durationMs, response_body: outcome.responseBody }
      : { error: outcome.error, duration_ms: outcome.durationMs };
  for (let tries = 1; ; tries++) {
    let problem: string;
    try {
      const res = await options.api.POST("/v1/webhooks/{id}/pending/{delivery_id}", {
        params: { path: { id: options.webhookId, delivery_id: deliveryId } },
        body,
        signal: AbortSignal.any([abandon, AbortSignal.timeout(ANSWER_TIMEOUT_MS)]),
      });
      if (res.error === undefined) return "recorded";
      const status = res.response.status;
      if (status === 409) return "answered after 60 s: handed out again";
      problem = `${status} ${res.error.error.code}`;
      if (status < 500 && status !== 429) return `answer refused: ${problem}: ${res.error.error.message}`;
    } catch (error) {
      problem = describe(error);
    }
    const delayMs = Math.min(500 * 2 ** (tries - 1), 5_000);
    if (abandon.aborted || Date.now() + delayMs >= deadline) return `not answered (${problem}): handed out again after 60 s`;
    options.warn(`listen: answering ${deliveryId} failed (${problem}); trying again in ${(delayMs / 1000).toFixed(1)} s`);
    await sleep(delayMs, abandon);
  }
}

/** The `event` of a delivery's JSON body (e.g. message.sent, webhook.test), or "?" when it has none. */
function kindOf(body: string): string {
  try {
    const event = (JSON.parse(body) as { event?: unknown }).event;
    return typeof event === "string" ? event : "?";
  } catch {
    return "?";
  }
}

/** The local time of day, HH:MM:SS. */
function clock(): string {
  return new Date().toTimeString().slice(0, 8);
}

/** An error in a few words: its message and, for a failed fetch, its cause's code. */
function describe(error: unknown): string {
  const e = error as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return `${e.message ?? String(error)}${cause ? `: ${cause}` : ""}`;
}

/** Resolves after `ms`, or at once when `signal` fires. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
