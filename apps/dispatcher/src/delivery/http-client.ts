import dns from "node:dns";
import https from "node:https";
import got, { type Got } from "got";
import { BLOCKED_CODE, isPublicAddress } from "@mailhooks/url-policy";

/**
 * The dispatcher's one HTTPS client: a keep-alive agent, got's own retry off (the retry
 * schedule is BullMQ's), redirects never followed, 2xx decided by the caller, and a DNS lookup
 * that refuses non-public addresses at connect time so that DNS rebinding cannot reach the
 * internal network. Built once per process.
 */
export interface HttpClientOptions {
  /** The receiver's deadline for the whole request, in ms (DELIVERY_TIMEOUT_MS). */
  timeoutMs: number;
  /** ALLOW_PRIVATE_TARGETS. */
  allowPrivateTargets: boolean;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** dns.lookup that fails with BLOCKED_CODE when any resolved address is not public. */
function publicOnlyLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const list = addresses as dns.LookupAddress[];
    const blocked = list.find((a) => !isPublicAddress(a.address));
    if (blocked || list.length === 0) {
      const error: NodeJS.ErrnoException = new Error(`${hostname} resolves to a non-public address`);
      error.code = BLOCKED_CODE;
      return callback(error, []);
    }
    if (options.all) return callback(null, list);
    callback(null, list[0].address, list[0].family);
  });
}

export function createHttpClient(options: HttpClientOptions): { client: Got; agent: https.Agent } {
  const agent = new https.Agent({
    keepAlive: true,
    maxSockets: 512,
    ...(options.allowPrivateTargets ? {} : { lookup: publicOnlyLookup as never }),
  });
  const client = got.extend({
    agent: { https: agent },
    retry: { limit: 0 },
    followRedirect: false,
    throwHttpErrors: false,
    timeout: { request: options.timeoutMs },
    responseType: "buffer",
    // Delivery time is measured by the caller; no need for got's timings object.
  });
  return { client, agent };
}
