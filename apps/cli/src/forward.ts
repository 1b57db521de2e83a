/**
 * The forwarding of `npm run -s listen` (docs/develop-locally.md): one pulled delivery POSTed to
 * the developer's local receiver, and what came back in the shape of an answer to
 * POST /v1/webhooks/{id}/pending/{delivery_id} (docs/api.md, "Listen webhooks").
 */

/** Why no answer came, as the deliveries log names it. */
export type ForwardError = "timeout" | "connection_error" | "tls_error" | "dns_error";

/** What the local receiver did with one request. */
export type Forwarded =
  { status: number; durationMs: number; responseBody: string } | { error: ForwardError; durationMs: number; detail: string };

/** How much of the receiver's answer is read and sent on: the API keeps its first 4096 bytes. */
const RESPONSE_READ_LIMIT_BYTES = 8192;

/** Hosts `npm run -s listen` forwards to without --allow-external: 127.0.0.0/8, ::1 and localhost. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || host === "::1") return true;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  return v4 !== null && Number(v4[1]) === 127 && v4.slice(2).every((part) => Number(part) <= 255);
}

/**
 * POSTs `item.body` (the exact string the signature covers) with `item.headers` to `url`, no
 * redirect followed, within `timeoutMs` (ms) for the answer and its body.
 * @returns the status and the first 8 KiB of the body; or the error when no answer came in time or
 *   the connection failed; or "abandoned" when `abandon` fired first (nothing is to be answered)
 */
export async function forward(
  url: string,
  item: { headers: Record<string, string>; body: string },
  timeoutMs: number,
  abandon: AbortSignal,
): Promise<Forwarded | "abandoned"> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = AbortSignal.any([timeout, abandon]);
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...item.headers },
      body: item.body,
      redirect: "manual",
      signal,
    });
    const responseBody = await readExcerpt(response);
    return { status: response.status, durationMs: elapsed(), responseBody };
  } catch (error) {
    if (abandon.aborted) return "abandoned";
    if (timeout.aborted) return { error: "timeout", durationMs: elapsed(), detail: `no answer within ${timeoutMs} ms` };
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const code = cause?.code ?? "";
    return { error: errorOf(code), durationMs: elapsed(), detail: code || cause?.message || (error as Error).message };
  }
}

/** The deliveries log's name of a failed connection's error code. */
function errorOf(code: string): ForwardError {
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "dns_error";
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return "tls_error";
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT" || code === "ETIMEDOUT") return "timeout";
  return "connection_error";
}

/** The first RESPONSE_READ_LIMIT_BYTES of `response`'s body as text; the rest is not read. */
async function readExcerpt(response: Response): Promise<string> {
  if (!response.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early cancels the stream: the rest is never downloaded.
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (size >= RESPONSE_READ_LIMIT_BYTES) break;
  }
  return Buffer.concat(chunks).subarray(0, RESPONSE_READ_LIMIT_BYTES).toString("utf8");
}
