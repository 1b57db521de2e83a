import { createApiClient } from "@mailhooks/api-client";

/** What `npm run demo -- --keep` prints once the report is out, while everything keeps running. */
export interface KeepContext {
  /** The API's base URL, e.g. http://127.0.0.1:41234. */
  baseUrl: string;
  /** The demo account's API key (full secret: this is the developer's own local demo). */
  apiKey: string;
  accountId: string;
  databaseUrl: string;
  redisUrl: string;
  /** "an embedded PostgreSQL 18 on …" for each service the demo started itself. */
  started: string[];
}

/**
 * The dashboard sign-in link (docs/dashboard.md, "Signing in"): a one-time link made through the
 * API's own POST /v1/dashboard-links (the typed client) with the demo's key, so that replays made
 * in the dashboard carry that key's id in the audit log. A link that cannot be made is reported
 * in words, never fatal.
 */
export async function dashboardLink(context: Pick<KeepContext, "baseUrl" | "apiKey">): Promise<{ url: string } | { problem: string }> {
  try {
    const api = createApiClient({ baseUrl: context.baseUrl, apiKey: context.apiKey });
    const { data, error, response } = await api.POST("/v1/dashboard-links");
    if (!data) return { problem: `${response.status}: ${error?.error.message ?? "unexpected answer"}` };
    return { url: data.url };
  } catch (error) {
    return { problem: (error as Error).message };
  }
}

/** The link's line, last of what the demo prints: `dashboard:  <url>` (or why there is none). */
export const linkLine = (link: { url: string } | { problem: string }) =>
  "url" in link ? `dashboard:  ${link.url}` : `dashboard:  no sign-in link (${link.problem})`;

/**
 * The last line without --keep: everything stops right after the report, so no link is printed
 * (it would lead to an API that is gone); it says how to get one instead.
 */
export const NOT_KEPT_LINE =
  "dashboard:  everything has stopped; to open this demo's data in the dashboard, run `npm run demo -- --keep`: it keeps running and ends with a sign-in link";

/** The lines printed under --keep: where the API is, how to call it, how to stop; the sign-in link last. */
export async function keepLines(context: KeepContext): Promise<string[]> {
  const link = await dashboardLink(context);
  return [
    "",
    "=== still running (--keep) ===",
    `API:        ${context.baseUrl}`,
    `API key:    ${context.apiKey} (account ${context.accountId})`,
    `try:        curl -H 'authorization: Bearer ${context.apiKey}' ${context.baseUrl}/v1/events`,
    `PostgreSQL: ${context.databaseUrl}`,
    `Redis:      ${context.redisUrl}`,
    ...context.started.map((s) => `started:    ${s}`),
    "press Ctrl-C to stop the API, the dispatcher, the receiver and what the demo started",
    `another sign-in link: curl -X POST -H 'authorization: Bearer ${context.apiKey}' ${context.baseUrl}/v1/dashboard-links`,
    "open the dashboard with this one-time sign-in link (valid 15 minutes):",
    linkLine(link),
  ];
}
