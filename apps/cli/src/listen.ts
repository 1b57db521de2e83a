/**
 * `npm run -s listen -- --forward-to http://localhost:PORT/PATH [--webhook ID | --events KINDS
 *   [--inbox ID]] [--api URL] [--key KEY] [--allow-external]` (docs/develop-locally.md): receives
 * the account's deliveries on this machine without exposing a port. Without --webhook it creates a
 * listen webhook (POST /v1/webhooks `{url: null, mode: "listen"}`) and prints its id and secret
 * once; then it pulls, forwards and answers (listen-loop.ts) and prints one line per delivery.
 * Reads API_URL (default http://127.0.0.1:3000) and API_KEY when --api and --key are not given.
 * Ctrl-C or SIGTERM stops it within 3 s and exits 0; exits 1 when the API refuses (a bad key, an
 * unknown, push or disabled webhook), 2 on a usage error (a forward URL off this machine without
 * --allow-external among them).
 */
import { z } from "zod";
import { createApiClient, type ApiClient } from "@mailhooks/api-client";
import { createCommand } from "@mailhooks/command-line";
import { EVENT_TYPES, SUBSCRIBABLE_EVENT_TYPES } from "@mailhooks/events";
import { isLoopbackHost } from "./forward.js";
import { ListenRefused, runListen } from "./listen-loop.js";

/** How long a forward in flight may still finish after Ctrl-C, in ms. */
const STOP_GRACE_MS = 3_000;
/** Deadline of each forward, in ms: under the API's 60 s, after which an unanswered item is handed out again. */
const FORWARD_TIMEOUT_MS = 30_000;

const environment = z.object({
  API_URL: z.url().default("http://127.0.0.1:3000"),
  API_KEY: z.string().optional(),
});

interface Flags {
  forwardTo: string;
  webhook?: string;
  events?: string;
  inbox?: string;
  api?: string;
  key?: string;
  allowExternal?: boolean;
}

const program = createCommand({
  name: "npm run -s listen --",
  description:
    "Receive your account's deliveries on this machine without exposing a port: pulls a listen webhook's deliveries from the API and POSTs each, exact body and signed headers, to --forward-to, then records what your receiver answered (a 2xx delivers; anything else is retried on the usual schedule). Without --webhook it creates a listen webhook and prints its id and secret once; run again with --webhook ID to get what arrived meanwhile, oldest first. Prints one line per delivery: time, kind, event id, status, ms. Ctrl-C stops it.",
  examples: [
    "API_KEY=whk_... npm run -s listen -- --forward-to http://localhost:8080/webhooks",
    "API_KEY=whk_... npm run -s listen -- --forward-to http://127.0.0.1:8080/webhooks --events message.received,message.bounced --inbox inbox_support",
    "npm run -s listen -- --forward-to http://localhost:8080/webhooks --webhook wh_019a2b3c4d5e7f00a1b2c3d4e5f60718 --api https://webhooks.example.com --key whk_...",
  ],
  environment,
})
  .usage("--forward-to <URL> [--webhook <ID> | --events <KINDS> [--inbox <ID>]] [options]")
  .requiredOption(
    "--forward-to <URL>",
    "required: where each delivery is POSTed, e.g. http://localhost:8080/webhooks (this machine only, unless --allow-external)",
  )
  .option("--webhook <ID>", "the listen webhook to pull (made by an earlier run); without it a new one is created")
  .option("--events <KINDS>", `a new webhook's event kinds, comma-separated (default: ${EVENT_TYPES.join(",")})`)
  .option("--inbox <ID>", "a new webhook receives only the events of this inbox (comma-separated: of these inboxes)")
  .option("--api <URL>", "the service's API (default: API_URL, else http://127.0.0.1:3000)")
  .option("--key <KEY>", "an API key of your account (default: API_KEY)")
  .option("--allow-external", "allow a --forward-to host other than localhost, 127.0.0.0/8 or ::1")
  .action(async (flags: Flags) => {
    const settings = validate(flags);
    const api = createApiClient({ baseUrl: settings.apiUrl, apiKey: settings.apiKey });
    const webhookId = flags.webhook ?? (await createListenWebhook(api, settings.events, settings.inboxIds));
    console.log(`listening: webhook ${webhookId} at ${settings.apiUrl}, forwarding to ${flags.forwardTo} (Ctrl-C to stop)`);

    const stop = new AbortController();
    const abandon = new AbortController();
    const onSignal = () => {
      if (stop.signal.aborted) return abandon.abort();
      console.error(`listen: stopping (a delivery in flight gets ${STOP_GRACE_MS / 1000} s to finish)`);
      stop.abort();
      setTimeout(() => abandon.abort(), STOP_GRACE_MS).unref();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    try {
      await runListen(
        {
          api,
          webhookId,
          forwardTo: flags.forwardTo,
          forwardTimeoutMs: FORWARD_TIMEOUT_MS,
          print: (line) => console.log(line),
          warn: (line) => console.error(line),
        },
        stop.signal,
        abandon.signal,
      );
    } catch (error) {
      if (!(error instanceof ListenRefused)) throw error;
      console.error(`listen: the API refused to hand out webhook ${webhookId}'s deliveries: ${error.message}`);
      process.exit(1);
    }
    console.log("stopped");
    // Idle keep-alive connections to the API or the receiver must not hold the exit.
    process.exit(0);
  });

/** The checked settings of a run; a usage error (exit 2, with the usage) otherwise. */
function validate(flags: Flags): { apiUrl: string; apiKey: string; events: string[]; inboxIds?: string[] } {
  let target: URL;
  try {
    target = new URL(flags.forwardTo);
  } catch {
    return program.error("listen: --forward-to must be an absolute URL, e.g. http://localhost:8080/webhooks");
  }
  if (target.protocol !== "http:" && target.protocol !== "https:")
    return program.error("listen: --forward-to must be an http:// or https:// URL");
  if (!flags.allowExternal && !isLoopbackHost(target.hostname))
    return program.error(
      `listen: --forward-to ${target.hostname} is not this machine (localhost, 127.0.0.0/8, ::1): give --allow-external to forward there`,
    );
  if (flags.webhook !== undefined && (flags.events !== undefined || flags.inbox !== undefined))
    return program.error("listen: --events and --inbox make a new webhook: they cannot go with --webhook");
  const list = (text: string) =>
    text
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
  const events = flags.events === undefined ? [...EVENT_TYPES] : list(flags.events);
  const unknown = events.filter((e) => !(SUBSCRIBABLE_EVENT_TYPES as readonly string[]).includes(e));
  if (events.length === 0 || unknown.length > 0)
    return program.error(
      `listen: --events must list kinds among ${SUBSCRIBABLE_EVENT_TYPES.join(", ")}${unknown.length ? ` (not: ${unknown.join(", ")})` : ""}`,
    );
  const inboxIds = flags.inbox === undefined ? undefined : list(flags.inbox);
  if (inboxIds?.length === 0) return program.error("listen: --inbox must name an inbox");

  const env = environment.safeParse({ API_URL: process.env.API_URL || undefined, API_KEY: process.env.API_KEY || undefined });
  const apiUrl = flags.api ?? (env.success ? env.data.API_URL : "");
  if (!z.url({ protocol: /^https?$/ }).safeParse(apiUrl).success)
    return program.error("listen: --api (or API_URL) must be an http:// or https:// URL");
  const apiKey = flags.key ?? (env.success ? env.data.API_KEY : undefined);
  if (!apiKey) return program.error("listen: an API key is needed: --key KEY or API_KEY");
  return { apiUrl, apiKey, events, inboxIds };
}

/**
 * Creates a listen webhook for `events` (and `inboxIds`) and prints its id and secret (shown this
 * once). Exits 1 when the API refuses or cannot be reached.
 * @returns its id
 */
async function createListenWebhook(api: ApiClient, events: string[], inboxIds: string[] | undefined): Promise<string> {
  let failure: string;
  try {
    const res = await api.POST("/v1/webhooks", {
      body: {
        url: null,
        mode: "listen",
        events: events as (typeof SUBSCRIBABLE_EVENT_TYPES)[number][],
        ...(inboxIds ? { inbox_ids: inboxIds } : {}),
      },
      signal: AbortSignal.timeout(15_000),
    });
    if (res.data !== undefined) {
      console.log(`created listen webhook ${res.data.id} for ${res.data.events.join(", ")}`);
      console.log(`secret ${res.data.secret} (your receiver verifies signatures with it; GET /v1/webhooks/{id}/secret shows it again)`);
      console.log(`to resume later: npm run -s listen -- --forward-to <URL> --webhook ${res.data.id}`);
      return res.data.id;
    }
    failure = `${res.response.status} ${res.error.error.code}: ${res.error.error.message}`;
  } catch (error) {
    const e = error as Error & { cause?: { code?: string } };
    failure = `${e.message}${e.cause?.code ? `: ${e.cause.code}` : ""}`;
  }
  console.error(`listen: could not create a listen webhook: ${failure}`);
  return process.exit(1);
}

program.parseAsync(process.argv).catch((error: Error) => {
  console.error(`listen: ${error.message}`);
  process.exit(1);
});
