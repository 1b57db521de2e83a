import type { Request, RequestHandler } from "express";
import type { KeyAuthenticator, Principal } from "@mailhooks/access";
import { ipKeyGenerator } from "express-rate-limit";
import { AppError, type ErrorReason } from "../errors.js";
import type { FailureLimiter } from "./failure-limiter.js";

declare module "express-serve-static-core" {
  interface Request {
    principal?: Principal;
  }
}

/**
 * Bearer authentication of every /v1 route (docs/api.md, "Conventions"): 401 unless the key is live.
 * A key authenticated before is recognised in memory (KeyAuthenticator); one with a live key's
 * prefix is looked up at once (KeyAuthenticator.plausible). Anything else first
 * meets the per-address limiter of requests without a valid key
 * (UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE, a rolling minute): an address past it gets 429 with
 * Retry-After before any key is looked up, so a flood of invented keys costs no PostgreSQL query. The client address
 * is Express's `req.ip`, which believes X-Forwarded-For only as TRUST_PROXY says, IPv6 counted per /64.
 */
export function requireApiKey(options: {
  keys: KeyAuthenticator;
  failures: FailureLimiter | null;
  recordUsage: (keyId: string) => void;
}): RequestHandler {
  const unauthorized = (reason: ErrorReason<"unauthorized">, message: string) =>
    new AppError("unauthorized", reason, message, { headers: { "WWW-Authenticate": "Bearer" } });
  return async (req, _res, next) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
    const presented = match?.[1];
    let principal = presented ? options.keys.cached(presented) : undefined;
    if (!principal) {
      const address = unauthenticatedClient(req);
      // The place is taken before the lookup: however many arrive at once, no more than the
      // limit reach PostgreSQL.
      // A key that authenticated recently (its cache entry expired), or that carries a live key's
      // prefix (a valid key this process has not seen yet), is looked up without meeting the
      // limit: failed authentications from an address never lock out its valid keys.
      const known = presented !== undefined && (options.keys.knownValid(presented) || options.keys.plausible(presented));
      const wait = options.failures && !known ? await options.failures.reserve(address) : 0;
      if (wait > 0) {
        throw new AppError(
          "rate_limited",
          "unauthenticated_rate_limit",
          `too many requests without a valid API key from this address; retry in ${wait} s`,
          { headers: { "Retry-After": String(wait) } },
        );
      }
      principal = (presented ? await options.keys.authenticate(presented) : null) ?? undefined;
      if (!principal)
        throw presented
          ? unauthorized("api_key_invalid", "unknown or revoked API key")
          : unauthorized("api_key_missing", "missing or malformed Authorization: Bearer <API_KEY> header");
      if (!known) await options.failures?.release(address);
    }
    options.recordUsage(principal.apiKeyId);
    req.principal = principal;
    next();
  };
}

/**
 * The client as the limiter of requests without valid credentials counts it (requireApiKey, and
 * the dashboard's invalid sign-in links and session cookies, which share the limiter).
 */
export function unauthenticatedClient(req: Request): string {
  return clientKeyOf(req.ip ?? req.socket.remoteAddress ?? "unknown");
}

/**
 * The key an address is counted under: an IPv6 address by its /64 (one host is commonly given a
 * whole /64, 2^64 addresses), an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) as its IPv4
 * address, anything else as it is.
 */
export function clientKeyOf(address: string): string {
  return ipKeyGenerator(address, 64);
}

/** The authenticated principal; only valid behind requireApiKey. */
export function principalOf(req: { principal?: Principal }): Principal {
  if (!req.principal) throw new AppError("unauthorized", "not_authenticated", "not authenticated");
  return req.principal;
}
