import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/**
 * Destination address policy (CONTRACT.md section 2, ALLOW_PRIVATE_TARGETS=false): only
 * globally routable unicast addresses may be connected to. Loopback, private, link-local
 * (cloud metadata included), CGNAT, multicast, reserved, unspecified, and every IPv6 form that
 * embeds an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo) are refused. Ranges come from
 * ipaddr.js rather than a table of our own.
 */
export function isPublicAddress(address: string): boolean {
  // isIP first: ipaddr.js also accepts shorthand IPv4 forms such as "134744072".
  if (isIP(address) === 0 || !ipaddr.isValid(address)) return false;
  return ipaddr.parse(address).range() === "unicast";
}

/** True when `hostname` (as in a URL, IPv6 possibly bracketed) is an IP literal. */
export function ipLiteral(hostname: string): string | null {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  return isIP(bare) ? bare : null;
}

/** Error code carried by a connection refused by the policy. */
export const BLOCKED_CODE = "EBLOCKEDDESTINATION";
