import { createHash } from "node:crypto";
import type { Request, Response } from "express";
import { tokenKeyPrefix, type KeyAuthenticator } from "@mailhooks/access";
import { unauthenticatedClient } from "../http/auth.js";
import type { FailureLimiter } from "../http/failure-limiter.js";
import { render } from "./render.js";

/**
 * The dashboard's invalid sign-in links and session cookies meet the API's limiter of requests
 * without valid credentials (UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE per client address, the same
 * instance as requireApiKey's): a place is reserved before the token is looked up in PostgreSQL
 * and given back when it was valid, so a flood of invented tokens costs at most the limit in
 * queries. A valid token is never held up by what its address did, as a valid API key is not
 * (requireApiKey): a token carries the public prefix of the key it acts for (tokenKeyPrefix of
 * @mailhooks/access), and one whose prefix is a live key's is looked up without meeting the limit;
 * a wrong token with a live prefix makes that prefix meet it for a minute (KeyAuthenticator), so
 * guessing stays slow. A session that was valid recently in this process skips the limit too.
 * Tokens made before they carried a prefix meet the limit.
 */

export interface TokenLookups {
  /**
   * `lookup()` unless the client is past the limit (then `{ retryAfter }` in seconds); `valid`
   * says whether the answer gives the place back. `remember`: a valid token skips the limit for
   * a while afterwards (sessions; a sign-in link works once anyway). `unknown`: whether the
   * answer says no such token exists (a guess; by default any answer that is not valid), which
   * makes the prefix it carries meet the limit for a minute.
   */
  run<T>(
    req: Request,
    token: string,
    lookup: () => Promise<T>,
    valid: (value: T) => boolean,
    options?: { remember?: boolean; unknown?: (value: T) => boolean },
  ): Promise<{ retryAfter: number } | { value: T }>;
}

/** How long a valid session skips the limit after its last successful lookup. */
const RECENT_MS = 10 * 60_000;
const RECENT_MAX = 10_000;

export function tokenLookups(failures: FailureLimiter | null, keys: Pick<KeyAuthenticator, "plausiblePrefix" | "distrust">): TokenLookups {
  const recent = new Map<string, number>();
  const digest = (token: string) => createHash("sha256").update(token, "utf8").digest("base64url");
  return {
    async run(req, token, lookup, valid, options = {}) {
      const remember = options.remember ?? false;
      const unknown = options.unknown ?? ((value) => !valid(value));
      const hash = digest(token);
      const prefix = tokenKeyPrefix(token);
      const plausible = prefix !== null && keys.plausiblePrefix(prefix);
      const known = plausible || (remember && (recent.get(hash) ?? 0) > Date.now());
      const address = unauthenticatedClient(req);
      const wait = failures && !known ? await failures.reserve(address) : 0;
      if (wait > 0) return { retryAfter: wait };
      const value = await lookup();
      if (!valid(value)) {
        recent.delete(hash);
        if (prefix !== null && unknown(value)) keys.distrust(prefix);
        // A real token that no longer works (used, expired) still counts as a failure.
        if (known) await failures?.reserve(address);
        return { value };
      }
      if (!known) await failures?.release(address);
      if (remember) {
        if (recent.size >= RECENT_MAX) recent.clear();
        recent.set(hash, Date.now() + RECENT_MS);
      }
      return { value };
    },
  };
}

/** The page for a client past the limit: 429 with Retry-After, in words. */
export function tooManyAttempts(res: Response, retryAfter: number): void {
  res.setHeader("Retry-After", String(retryAfter));
  res.setHeader("Cache-Control", "no-store");
  render(
    res,
    "error",
    {
      title: "Too many attempts",
      heading: "Too many attempts",
      message: `Too many sign-in links or sessions that are not valid came from your network in the last minute. Wait ${retryAfter} second${retryAfter === 1 ? "" : "s"}, then open your sign-in link again.`,
    },
    429,
  );
}
