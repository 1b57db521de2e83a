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
 * The dashboard sign-in link (CONTRACT.md sections 4a and 9): a one-time link made through the
 * API's own POST /v1/dashboard-links with the demo's key, so that replays made in the dashboard
 * carry that key's id in the audit log. Printed at the end of the report; usable while the demo
 * runs (`-- --keep`). A link that cannot be made is reported on its line, never fatal.
 */
export async function dashboardLines(context: KeepContext): Promise<string[]> {
  try {
    const res = await fetch(`${context.baseUrl}/v1/dashboard-links`, { method: "POST", headers: { authorization: `Bearer ${context.apiKey}` } });
    const body = (await res.json()) as { url?: string; error?: { message?: string } };
    if (res.status !== 201 || !body.url) return [`dashboard:  no sign-in link (${res.status}: ${body.error?.message ?? "unexpected answer"})`];
    return [
      `dashboard:  ${body.url}`,
      `            (one-time sign-in link, valid 15 minutes; another: curl -X POST -H 'authorization: Bearer ${context.apiKey}' ${context.baseUrl}/v1/dashboard-links)`,
    ];
  } catch (error) {
    return [`dashboard:  no sign-in link (${(error as Error).message})`];
  }
}

/** The lines printed under --keep: where the API is, how to call it, how to stop. */
export async function keepLines(context: KeepContext): Promise<string[]> {
  return [
    "",
    "=== still running (--keep) ===",
    `API:        ${context.baseUrl}`,
    `API key:    ${context.apiKey} (account ${context.accountId})`,
    `try:        curl -H 'authorization: Bearer ${context.apiKey}' ${context.baseUrl}/v1/events`,
    ...(await dashboardLines(context)),
    `PostgreSQL: ${context.databaseUrl}`,
    `Redis:      ${context.redisUrl}`,
    ...context.started.map((s) => `started:    ${s}`),
    "press Ctrl-C to stop the API, the dispatcher, the receiver and what the demo started",
  ];
}
