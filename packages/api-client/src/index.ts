import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./generated/openapi.js";

/**
 * A typed client of the service's REST API: openapi-fetch over the types openapi-typescript
 * generates from the committed OpenAPI document (openapi.json; `src/generated/`, made by
 * `npm ci` and `npm run build`). Calls answer `{data, error, response}`: `data` for a documented
 * success, `error` (the `{error: {code, message, details?}}` body) otherwise.
 *
 *     const api = createApiClient({ baseUrl: "http://127.0.0.1:3000", apiKey });
 *     const { data, error } = await api.POST("/v1/webhooks", { body: { url, events: ["message.sent"] } });
 */

export type { components, operations, paths, webhooks } from "./generated/openapi.js";

/** The document's schemas by name, e.g. `Schemas["Webhook"]`, `Schemas["EventDetail"]`. */
export type Schemas = components["schemas"];
export type ApiClient = Client<paths>;
/** The error body of every failed call (docs/api.md, "Errors"). */
export type ErrorBody = Schemas["Error"];

export interface ApiClientOptions {
  /** e.g. `http://127.0.0.1:3000` (a trailing slash is ignored). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string;
}

export function createApiClient(options: ApiClientOptions): ApiClient {
  return createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, ""), headers: { authorization: `Bearer ${options.apiKey}` } });
}

/** A failed call: its HTTP status and the API's error code and message (when the body had them). */
export class ApiError extends Error {
  override name = "ApiError";
  readonly code: string | undefined;
  constructor(
    readonly status: number,
    body: unknown,
  ) {
    const error = (body as Partial<ErrorBody> | undefined)?.error;
    super(`${status}${error?.code ? ` ${error.code}` : ""}: ${error?.message ?? "no error body"}`);
    this.code = error?.code;
  }
}

/** `data` of a call, or throws ApiError with its status and error body. */
export function dataOf<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined || result.error !== undefined) throw new ApiError(result.response.status, result.error);
  return result.data;
}

/** The paths of the lists (docs/api.md, "Conventions": `{data, next_cursor}`, newest first). */
export type ListPath = "/v1/webhooks" | "/v1/events" | "/v1/deliveries" | "/v1/audit-log";
type ListOperation<P extends ListPath> = paths[P]["get"];
/** A list's filters, without the paging (`limit`, `cursor`) that listAll does itself. */
export type ListFilter<P extends ListPath> = Omit<NonNullable<ListOperation<P>["parameters"]["query"]>, "limit" | "cursor">;
export type ListItem<P extends ListPath> = ListOperation<P>["responses"][200]["content"]["application/json"]["data"][number];

/**
 * Every item of a list matching `filter`, newest first, following `next_cursor` 100 at a time.
 * @throws ApiError on the first call that fails
 */
export async function listAll<P extends ListPath>(api: ApiClient, path: P, filter?: ListFilter<P>): Promise<ListItem<P>[]> {
  const items: ListItem<P>[] = [];
  let cursor: string | undefined;
  do {
    // openapi-fetch cannot relate a generic path to its parameters: the signature above is the typed one.
    const page = dataOf(
      await (
        api.GET as (
          p: string,
          init: unknown,
        ) => Promise<{ data?: { data: ListItem<P>[]; next_cursor: string | null }; error?: unknown; response: Response }>
      )(path, {
        params: { query: { ...filter, limit: 100, ...(cursor ? { cursor } : {}) } },
      }),
    );
    items.push(...page.data);
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return items;
}

/**
 * POST /v1/inboxes/{inbox_id}/messages: feeds a raw RFC 5322 message (sent as is, with
 * `Content-Type: message/rfc822`).
 */
export function postRawMessage(api: ApiClient, inboxId: string, raw: Uint8Array | string, init: { idempotencyKey?: string } = {}) {
  return api.POST("/v1/inboxes/{inbox_id}/messages", {
    params: { path: { inbox_id: inboxId }, header: init.idempotencyKey ? { "Idempotency-Key": init.idempotencyKey } : {} },
    body: raw as string,
    headers: { "content-type": "message/rfc822" },
    bodySerializer: (body) => body,
  });
}
