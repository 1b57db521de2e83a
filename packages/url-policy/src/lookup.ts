import dns from "node:dns";
import { BLOCKED_CODE } from "./address-policy.js";
import { isAllowedAddress, type PrivateTargets } from "./private-targets.js";

/**
 * The connect-time half of the address policy (docs/configuration.md): a DNS lookup for
 * `net.connect` / `https.Agent` that refuses a host name as soon as any of its addresses is not
 * public. Checking the address actually connected to (not only the URL at registration) is what
 * defeats DNS rebinding; refusing when *any* answer is private, rather than filtering the
 * answers, keeps a name that mixes public and private addresses from ever reaching the internal
 * network through a later, differently ordered answer.
 */

/** The callback shape of `dns.lookup` in both of its modes. */
export type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** A `dns.lookup`-compatible function, as `net.connect({ lookup })` calls it. */
export type LookupFunction = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => void;

/** What the policy needs of the underlying resolver: every address of a name. */
export type LookupAllFunction = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
) => void;

function policyError(message: string, code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/**
 * Wraps `lookup` (default `dns.lookup`) so that a name resolving to any address that `targets`
 * does not allow (isAllowedAddress: by default, any non-public address) fails with code
 * BLOCKED_CODE. Answers like the wrapped lookup: the whole list for `all: true` callers, else the
 * first address and its family. Resolver errors pass through unchanged; an empty answer fails
 * with ENOTFOUND.
 */
export function createPublicOnlyLookup(lookup: LookupAllFunction = dns.lookup, targets: PrivateTargets = false): LookupFunction {
  return (hostname, options, callback) => {
    // net passes an options object; tolerate the legacy (hostname, family, cb) form too.
    const opts: dns.LookupOptions = typeof options === "number" ? { family: options } : (options ?? {});
    lookup(hostname, { ...opts, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      if (!addresses || addresses.length === 0) return callback(policyError(`${hostname} has no address`, "ENOTFOUND"), []);
      const blocked = addresses.find((a) => !isAllowedAddress(a.address, targets));
      if (blocked)
        return callback(
          policyError(`${hostname} resolves to ${blocked.address}, which ALLOW_PRIVATE_TARGETS does not allow`, BLOCKED_CODE),
          [],
        );
      if (opts.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}
