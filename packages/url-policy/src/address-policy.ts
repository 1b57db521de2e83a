import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/**
 * IPv6 global unicast space (RFC 4291 section 2.4, IANA "IPv6 Address Space" registry): no
 * address outside 2000::/3 is routed on the Internet. Requiring it refuses the low special
 * entries (::/128, ::1, ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 100::/64, 5f00::/16,
 * fc00::/7, fe80::/10, ff00::/8) a second time, and also what ipaddr.js has no name for: the
 * dummy prefix 100:0:0:1::/64 (RFC 9780, newer than ipaddr.js 2.5), the deprecated
 * IPv4-compatible ::/96 (RFC 4291 section 2.5.5.1, e.g. ::127.0.0.1) and every unassigned block.
 */
const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR("2000::/3");

/**
 * The special-purpose range `ip` falls in, or null when it is globally routable unicast.
 * Names are ipaddr.js 2.5's (its `range()`, which covers every entry of the IANA IPv4 and IPv6
 * Special-Purpose Address Registries, RFC 6890 and updates, up to 3fff::/20 and 5f00::/16),
 * plus "notGlobalUnicast" for IPv6 outside 2000::/3.
 */
function specialPurposeRange(ip: ipaddr.IPv4 | ipaddr.IPv6): string | null {
  const named = ip.range();
  if (named !== "unicast") return named;
  if (ip.kind() === "ipv6" && !ip.match(IPV6_GLOBAL_UNICAST)) return "notGlobalUnicast";
  return null;
}

/**
 * Destination address policy (docs/configuration.md, ALLOW_PRIVATE_TARGETS=false): true only
 * for a canonical IPv4 or IPv6 literal that is globally routable unicast and outside every
 * special-purpose entry. Refused: loopback, private, link-local (cloud metadata included),
 * CGNAT, multicast, broadcast, unspecified, documentation, benchmarking, reserved, and every
 * IPv6 form that embeds an IPv4 address (mapped, translated, NAT64, 6to4, Teredo,
 * IPv4-compatible), whatever the embedded address. Entries the registry calls "globally
 * reachable" (AS112, AMT, ORCHIDv2, ...) are refused too: a webhook endpoint never lives there.
 * Never throws; anything that is not an IP literal is refused.
 */
export function isPublicAddress(address: string): boolean {
  // isIP first: ipaddr.js also accepts shorthand IPv4 forms such as "134744072".
  if (isIP(address) === 0 || !ipaddr.isValid(address)) return false;
  const ip = ipaddr.parse(address);
  // A zone index scopes a link-local address to an interface; a global address never has one.
  if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).zoneId !== undefined) return false;
  return specialPurposeRange(ip) === null;
}

/** The IP literal in `hostname` (as in a URL, IPv6 possibly bracketed), unbracketed; null for a DNS name. */
export function ipLiteral(hostname: string): string | null {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  return isIP(bare) ? bare : null;
}

/** Error code carried by a connection refused by the policy. */
export const BLOCKED_CODE = "EBLOCKEDDESTINATION";
