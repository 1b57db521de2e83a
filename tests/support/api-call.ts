import { checkAgainstDocument } from "./openapi-check.js";

/** One call of the API as the e2e tests make it, its answer checked against the OpenAPI document. */

export interface ApiAnswer {
  status: number;
  /** The body parsed as JSON; the raw text when it is not JSON; null when empty. */
  body: any;
  headers: Headers;
}

export interface CallOptions {
  /**
   * Skip the check against the OpenAPI document. Only for requests that deliberately step
   * outside it in ways the document cannot describe (raw protocol abuse); every other answer,
   * errors and unknown routes included, is checked.
   */
  unchecked?: boolean;
}

/**
 * `method urlPath` on `baseUrl` with `Authorization: Bearer <key>` (none when `key` is null).
 * A body that is not a string or a Buffer is sent as JSON (Content-Type defaults to
 * application/json). @throws Error when the answer does not match the document
 */
export async function callApi(
  baseUrl: string,
  key: string | null,
  method: string,
  urlPath: string,
  body?: unknown,
  headers: Record<string, string> = {},
  options: CallOptions = {},
): Promise<ApiAnswer> {
  const init: RequestInit = { method, headers: { ...(key === null ? {} : { authorization: `Bearer ${key}` }), ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" || Buffer.isBuffer(body) ? (body as string) : JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] ??= "application/json";
  }
  const response = await fetch(`${baseUrl}${urlPath}`, init);
  const text = await response.text();
  let parsed: unknown = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  const answer = { status: response.status, body: parsed, headers: response.headers };
  if (!options.unchecked) checkAgainstDocument(method, urlPath, { ...answer, text });
  return answer;
}
