import type { ClientRequest } from "node:http";
import type { Readable } from "node:stream";
import https from "node:https";
import tls from "node:tls";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import got, { type Got } from "got";
import { RESPONSE_BODY_LIMIT_BYTES } from "@mailhooks/delivery-state";
import { BLOCKED_CODE, createPublicOnlyLookup, ipLiteral, isAllowedAddress, type PrivateTargets } from "@mailhooks/url-policy";

/**
 * The dispatcher's one HTTPS client: a keep-alive agent whose connections share one TLS context,
 * got's own retry off (retries are the work queue's), redirects never followed, 2xx decided by
 * the caller, and, unless every private target is allowed, the address policy at connect time
 * (ALLOW_PRIVATE_TARGETS: only public addresses, or also those of its ranges): a DNS lookup that
 * refuses a name resolving to an address it does not allow (no DNS rebinding into the internal
 * network), and the same check of an IP literal host, which Node connects to without a lookup.
 *
 * A receiver is untrusted: whatever it sends, an attempt costs bounded time and memory.
 * - The deadline (got's `timeout.request`, DELIVERY_TIMEOUT_MS) starts before the DNS lookup and
 *   covers connect, the TLS handshake, sending, and the status line and headers. A handshake or a
 *   status line that never comes, or headers that trickle, end as a time-out.
 * - Headers are bounded by Node's maxHeaderSize (16 KiB by default); more is a parse error
 *   (HPE_HEADER_OVERFLOW), never buffered. The status line came before them, though: the first
 *   STATUS_LINE_PEEK_BYTES of the socket's answer are kept aside, and an overflow after a
 *   readable status line is that status, with no body (see postForAnswer).
 * - Success is decided on the status line (docs/receivers.md; docs/api.md, "Deliveries log"). The body is then read
 *   for at most BODY_WAIT_MS, never past the deadline, and only its first
 *   RESPONSE_BODY_LIMIT_BYTES are kept (see readAnswer).
 */
export interface HttpClientOptions {
  /** The receiver's deadline, in ms (DELIVERY_TIMEOUT_MS): the status line must arrive within it. */
  timeoutMs: number;
  /** ALLOW_PRIVATE_TARGETS: false (public addresses only), true (any), or the ranges also allowed. */
  allowPrivateTargets: PrivateTargets;
}

/**
 * How long the body excerpt may take once the headers are in, in ms. A receiver that answers
 * with a small body sends it with or right after its headers; one second leaves room for a slow
 * network without letting a trickling body hold a delivery slot for long. The excerpt is only
 * information for the log: the outcome was settled by the status line.
 */
export const BODY_WAIT_MS = 1_000;

/**
 * How many of the first bytes a receiver sends are kept aside to read the status line from
 * when the headers after it are too large for Node's parser: `HTTP/1.1 200 ` takes 13.
 */
export const STATUS_LINE_PEEK_BYTES = 64;

/** The status code of a status line at the start of `head` (`HTTP/1.x NNN`), else null. */
export function statusOfHead(head: Buffer): number | null {
  const match = /^HTTP\/1\.[01] ([1-9]\d\d)(?: |\r\n)/.exec(head.toString("latin1"));
  return match ? Number(match[1]) : null;
}

export function createHttpClient(options: HttpClientOptions): { client: Got; agent: https.Agent } {
  const targets = options.allowPrivateTargets;
  const agent = new https.Agent({
    keepAlive: true,
    maxSockets: 512,
    // The trusted roots and defaults, built once: without it Node builds a context per connection,
    // and a receiver that hangs costs a new connection per attempt (its socket ends at the deadline).
    secureContext: tls.createSecureContext(),
    ...(targets === true ? {} : { lookup: createPublicOnlyLookup(undefined, targets) }),
  });
  if (targets !== true) refuseLiteralsOutside(agent, targets);
  const client = got.extend({
    agent: { https: agent },
    retry: { limit: 0 },
    followRedirect: false,
    throwHttpErrors: false,
    // got cancels this timer when the response ends or the request is destroyed: readAnswer
    // ends every attempt within BODY_WAIT_MS of the headers, so in effect the deadline bounds
    // everything up to the status line, and the whole attempt never outlives it.
    timeout: { request: options.timeoutMs },
    // No Accept-Encoding: 4 KiB of text is not worth inflating, nor a decompression bomb's risk.
    decompress: false,
  });
  return { client, agent };
}

/**
 * Makes `agent` refuse, before connecting, an IP literal host that `targets` does not allow, with
 * the lookup's error code (BLOCKED_CODE): Node calls no lookup for a literal.
 */
function refuseLiteralsOutside(agent: https.Agent, targets: PrivateTargets): void {
  type Create = (options: { host?: string | null }, callback: (error: Error | null, socket?: Duplex) => void) => Duplex | undefined;
  const agentWithCreate = agent as unknown as { createConnection: Create };
  const create = agentWithCreate.createConnection.bind(agent);
  agentWithCreate.createConnection = (connectOptions, callback) => {
    const literal = ipLiteral(connectOptions.host ?? "");
    if (literal !== null && !isAllowedAddress(literal, targets)) {
      const error = Object.assign(new Error(`${literal} is an address ALLOW_PRIVATE_TARGETS does not allow`), { code: BLOCKED_CODE });
      process.nextTick(() => callback(error));
      return undefined;
    }
    return create(connectOptions, callback);
  };
}

/** What a receiver answered: its status and the start of its body. */
export interface ReceiverAnswer {
  statusCode: number;
  /** The first bytes of the body, at most RESPONSE_BODY_LIMIT_BYTES; null when headers too
   * large to read kept the body out of reach (only the status line was read). */
  body: Buffer | null;
  /** True when the body went on past `body` (or did not end within the wait). */
  truncated: boolean;
}

/**
 * POSTs `body` to `url` with `client` (see createHttpClient) in got's stream mode and resolves
 * once the answer is settled: at the end of a body of at most RESPONSE_BODY_LIMIT_BYTES (the
 * keep-alive socket then goes back to the agent), or as soon as more than that arrived, or
 * BODY_WAIT_MS after the headers, or at the deadline, whichever comes first; in the last three
 * cases the request and its socket are destroyed and the rest is never read. Headers over Node's
 * limit after a status line resolve as that status (2xx or not) with a null body. Rejects with
 * got's error (TimeoutError, RequestError with the socket's code) when no status line was
 * received.
 */
export function postForAnswer(
  client: Got,
  url: string,
  request: { body: string | Buffer | Readable; headers: Record<string, string> },
): Promise<ReceiverAnswer> {
  return new Promise((resolve, reject) => {
    const stream = client.stream.post(url, { body: request.body, headers: request.headers });
    const excerpt = Buffer.allocUnsafe(RESPONSE_BODY_LIMIT_BYTES);
    let length = 0;
    let statusCode: number | null = null;
    let settled = false;
    let bodyTimer: NodeJS.Timeout | undefined;
    // The first bytes of the answer on the socket, for the status line (see STATUS_LINE_PEEK_BYTES).
    const head = Buffer.alloc(STATUS_LINE_PEEK_BYTES);
    let headLength = 0;
    stream.once("request", (request: ClientRequest) => {
      request.once("socket", (socket: Socket) => {
        const peek = (chunk: Buffer) => {
          const n = Math.min(chunk.length, head.length - headLength);
          chunk.copy(head, headLength, 0, n);
          headLength += n;
          if (headLength === head.length) socket.off("data", peek);
        };
        // Before the HTTP parser's own listener: it fails on the very chunk that overflows.
        socket.prependListener("data", peek);
        // A keep-alive socket goes on to other requests: stop looking once this one is over.
        const stop = () => socket.off("data", peek);
        request.once("response", stop);
        request.once("close", stop);
      });
    });

    const settle = (complete: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(bodyTimer);
      stream.off("data", onData);
      if (!complete) stream.destroy();
      if (statusCode === null) return;
      resolve({ statusCode, body: Buffer.from(excerpt.subarray(0, length)), truncated: !complete });
    };
    const onData = (chunk: Buffer) => {
      const room = RESPONSE_BODY_LIMIT_BYTES - length;
      chunk.copy(excerpt, length, 0, Math.min(room, chunk.length));
      length += Math.min(room, chunk.length);
      if (chunk.length > room) settle(false);
    };

    // Stays attached: a stream error after the answer is settled must not become an uncaught one.
    stream.on("error", (error) => {
      if (statusCode === null && !settled) {
        settled = true;
        clearTimeout(bodyTimer);
        // Headers over the limit after a status line: the receiver did answer, with that status.
        const early = isHeaderOverflow(error) ? statusOfHead(head.subarray(0, headLength)) : null;
        if (early !== null) resolve({ statusCode: early, body: null, truncated: true });
        else reject(error);
        return;
      }
      // The status line was in time; an error in the body (the deadline, a reset) only ends the excerpt.
      settle(false);
    });
    stream.once("response", (response: { statusCode: number }) => {
      statusCode = response.statusCode;
      bodyTimer = setTimeout(() => settle(false), BODY_WAIT_MS);
      stream.on("data", onData);
      stream.once("end", () => settle(true));
    });
    stream.once("close", () => {
      if (statusCode !== null) return settle(false);
      if (!settled) {
        settled = true;
        reject(Object.assign(new Error("the request closed before any response"), { code: "ECONNRESET" }));
      }
    });
  });
}

/** Node's parse error for headers past maxHeaderSize, as got passes it on. */
function isHeaderOverflow(error: unknown): boolean {
  const codes = [(error as { code?: string }).code, (error as { cause?: { code?: string } }).cause?.code];
  return codes.includes("HPE_HEADER_OVERFLOW");
}
