import { createHash } from "node:crypto";
import type { PrismaClient } from "@mailhooks/db";
import { authenticateKey, isWellFormedKey, keyPrefixOf, type Principal } from "./api-keys.js";
import { setNewest } from "@mailhooks/bounded-map";

/**
 * Authentication without a PostgreSQL query per request. A key that authenticated is kept for
 * `ttlMs`; a key that did not is remembered as unknown for `negativeTtlMs`, so a client that
 * repeats a bad key costs no query either. Keys are held by their SHA-256 only. Every change to
 * a key is announced by PostgreSQL (`api_keys_changed`, see the api_keys_notify trigger): the
 * caller passes those notifications to `forget`, which drops the key (and every negative entry,
 * since a new key is about to exist), so a revocation ends a cached key within the notification's
 * delay; `ttlMs` only bounds staleness if a notification is missed, and the listener empties the
 * whole cache each time it (re)connects. A lookup still in flight when `forget` runs may have read
 * the key before the change committed: its answer is returned but never cached (each `forget`
 * starts a new generation, and only a lookup begun in the current one may write the caches), so a
 * revocation is immediate whatever lookups are under way.
 */
export interface KeyAuthenticator {
  /** The principal of a key authenticated before and still cached: no I/O. */
  cached(presented: string): Principal | undefined;
  /** True for a key that authenticated within the last day and was not revoked since (its
   * cache entry may have expired): such a key is not an anonymous guess. No I/O. */
  knownValid(presented: string): boolean;
  /**
   * True when `presented` carries the prefix of a live key (as told by `livePrefixes`) that no
   * wrong secret was presented with in the last minute: likely a real key this process has not
   * authenticated yet, looked up without meeting the limit of failed authentications. A guess
   * with a live key's prefix fails once, and the prefix is then not trusted for a minute. No I/O.
   */
  plausible(presented: string): boolean;
  /**
   * `plausible` for a bare prefix (`whk_<12 hex>`), as a dashboard link or session token carries
   * its key's (tokenKeyPrefix): true while the prefix is live and trusted. No I/O.
   */
  plausiblePrefix(prefix: string): boolean;
  /** A token with `prefix` turned out invalid: the prefix is not trusted for a minute (see `plausible`). */
  distrust(prefix: string): void;
  /** The prefixes of the live keys (startKeyAccess loads them, most recently used first; at most
   * MAX_LIVE_PREFIXES are kept); replaces what was known. */
  livePrefixes(prefixes: Iterable<string>): void;
  /** One key's prefix became live (created) or not (revoked). */
  livePrefix(prefix: string, live: boolean): void;
  /** The principal of `presented`, from the caches or from PostgreSQL; null for a key that is
   * malformed, unknown or revoked. */
  authenticate(presented: string): Promise<Principal | null>;
  /** Drops the cached entries of key `keyId` and every negative entry; everything when omitted. */
  forget(keyId?: string): void;
  /** How many lookups reached PostgreSQL so far. */
  readonly lookups: number;
}

export interface KeyCacheOptions {
  /** How long an authenticated key is trusted without a query, in ms. */
  ttlMs?: number;
  /** How long an unknown key is answered 401 without a query, in ms. */
  negativeTtlMs?: number;
  /** Entries per cache; the oldest go first beyond it. */
  maxEntries?: number;
  /** Called once per PostgreSQL lookup (a metric). */
  onLookup?: () => void;
}

/** How long a key that authenticated is known as a real key (not an anonymous guess). */
const RECENT_MS = 86_400_000;
/** How long a live prefix presented with a wrong secret is not trusted (see `plausible`). */
const SUSPECT_MS = 60_000;
/** Live prefixes kept at most (about 3 MiB of heap); past it the first known go first. */
export const MAX_LIVE_PREFIXES = 100_000;

const digest = (key: string) => createHash("sha256").update(key, "utf8").digest("hex");

/** A Map that forgets its least recently set entries past `max` (setNewest). */
function bounded<V>(max: number) {
  const map = new Map<string, V>();
  return {
    map,
    set: (key: string, value: V) => setNewest(map, key, value, max),
  };
}

export function createKeyAuthenticator(prisma: PrismaClient, options: KeyCacheOptions = {}): KeyAuthenticator {
  const ttlMs = options.ttlMs ?? 60_000;
  const negativeTtlMs = options.negativeTtlMs ?? 60_000;
  const positive = bounded<{ principal: Principal; until: number }>(options.maxEntries ?? 10_000);
  const recent = bounded<{ keyId: string; until: number }>(options.maxEntries ?? 10_000);
  const negative = bounded<number>(options.maxEntries ?? 10_000);
  let lookups = 0;
  let live = new Set<string>();
  const suspect = bounded<number>(options.maxEntries ?? 10_000);
  /** Bumped by every forget(): a lookup begun in an older generation caches nothing. */
  let generation = 0;

  const trusted = (prefix: string) => live.has(prefix) && (suspect.map.get(prefix) ?? 0) <= Date.now();
  const cachedByDigest = (hash: string) => {
    const hit = positive.map.get(hash);
    if (hit && hit.until > Date.now()) return hit.principal;
    if (hit) positive.map.delete(hash);
    return undefined;
  };

  return {
    cached: (presented) => (isWellFormedKey(presented) ? cachedByDigest(digest(presented)) : undefined),
    knownValid(presented) {
      if (!isWellFormedKey(presented)) return false;
      const entry = recent.map.get(digest(presented));
      return entry !== undefined && entry.until > Date.now();
    },
    plausible(presented) {
      const prefix = keyPrefixOf(presented);
      return prefix !== null && trusted(prefix);
    },
    plausiblePrefix: (prefix) => trusted(prefix),
    distrust(prefix) {
      if (live.has(prefix)) suspect.set(prefix, Date.now() + SUSPECT_MS);
    },
    livePrefixes(prefixes) {
      live = new Set();
      for (const prefix of prefixes) if (live.size < MAX_LIVE_PREFIXES) live.add(prefix);
    },
    livePrefix(prefix, isLive) {
      live.delete(prefix);
      if (!isLive) return;
      live.add(prefix);
      if (live.size > MAX_LIVE_PREFIXES) live.delete(live.values().next().value!);
    },
    async authenticate(presented) {
      if (!isWellFormedKey(presented)) return null;
      const hash = digest(presented);
      const hit = cachedByDigest(hash);
      if (hit) return hit;
      const unknownUntil = negative.map.get(hash);
      if (unknownUntil !== undefined && unknownUntil > Date.now()) return null;
      lookups++;
      options.onLookup?.();
      const begun = generation;
      const principal = await authenticateKey(prisma, presented);
      const prefix = keyPrefixOf(presented)!;
      if (!principal && live.has(prefix)) suspect.set(prefix, Date.now() + SUSPECT_MS);
      if (begun !== generation) return principal;
      if (principal) {
        negative.map.delete(hash);
        positive.set(hash, { principal, until: Date.now() + ttlMs });
        recent.set(hash, { keyId: principal.apiKeyId, until: Date.now() + RECENT_MS });
      } else {
        negative.set(hash, Date.now() + negativeTtlMs);
        recent.map.delete(hash);
      }
      return principal;
    },
    forget(keyId) {
      generation++;
      negative.map.clear();
      if (keyId === undefined) return positive.map.clear();
      for (const [hash, entry] of positive.map) if (entry.principal.apiKeyId === keyId) positive.map.delete(hash);
      for (const [hash, entry] of recent.map) if (entry.keyId === keyId) recent.map.delete(hash);
    },
    get lookups() {
      return lookups;
    },
  };
}
