import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { isPublicAddress } from "./address-policy.js";

/**
 * ALLOW_PRIVATE_TARGETS (docs/configuration.md): which addresses outside the public unicast space
 * deliveries may reach. `false` (the default): none; `true`: all of them; a list of CIDR ranges
 * (e.g. `127.0.0.0/8,::1/128`, what the demo and the tests use): only addresses in one of them.
 * Public addresses are always allowed. Checked on the literal of a URL at registration and on
 * every resolved address at connect time (lookup.ts, the dispatcher's HTTP client).
 */
export type PrivateTargets = boolean | PrivateRanges;

/** ALLOW_PRIVATE_TARGETS for a service whose receivers are on this machine: loopback only (the demo, the tests, the benchmark). */
export const LOOPBACK_TARGETS = "127.0.0.0/8,::1/128";

/** The ranges of a list: each `address/bits`, the address its network's (host bits cleared). */
export interface PrivateRanges {
  readonly ranges: readonly string[];
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** The parsed ranges of each list (a list is made once, at start-up). */
const parsed = new WeakMap<PrivateRanges, Range[]>();

function rangesOf(targets: PrivateRanges): Range[] {
  let ranges = parsed.get(targets);
  if (!ranges) {
    ranges = targets.ranges.map((text) => ipaddr.parseCIDR(text));
    parsed.set(targets, ranges);
  }
  return ranges;
}

/** One CIDR range, its address in canonical IPv4 or IPv6 form, normalized to its network; null when it is not one. */
function normalizeRange(text: string): string | null {
  const [address, bits, ...rest] = text.split("/");
  if (rest.length > 0 || bits === undefined || !/^\d{1,3}$/.test(bits) || isIP(address) === 0) return null;
  try {
    const cidr = `${address}/${Number(bits)}`;
    const [ip, length] = ipaddr.parseCIDR(cidr);
    if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).zoneId !== undefined) return null;
    const network = ip.kind() === "ipv4" ? ipaddr.IPv4.networkAddressFromCIDR(cidr) : ipaddr.IPv6.networkAddressFromCIDR(cidr);
    return `${network.toString()}/${length}`;
  } catch {
    return null;
  }
}

/**
 * Parses ALLOW_PRIVATE_TARGETS: `false` or `0`, `true` or `1`, or comma-separated CIDR ranges
 * (spaces around the commas allowed).
 * @throws Error saying which entry is not a range
 */
export function parsePrivateTargets(text: string): PrivateTargets {
  const value = text.trim();
  if (value === "false" || value === "0") return false;
  if (value === "true" || value === "1") return true;
  const entries = value.split(",").map((entry) => entry.trim());
  const ranges = entries.map(normalizeRange);
  const bad = entries.filter((_, i) => ranges[i] === null);
  if (bad.length > 0 || entries.length === 0) {
    throw new Error(
      `must be false, true, or comma-separated CIDR ranges such as 127.0.0.0/8,::1/128 (not a range: ${bad.map((e) => JSON.stringify(e)).join(", ")})`,
    );
  }
  return { ranges: [...new Set(ranges as string[])] };
}

/**
 * True when deliveries may reach `address` (an IP literal) under `targets`: a public address
 * always; another one when `targets` is true or one of its ranges holds it (an IPv4-mapped IPv6
 * address is matched as its IPv4 address). Never throws; anything that is not an IP literal is refused.
 */
export function isAllowedAddress(address: string, targets: PrivateTargets): boolean {
  if (isPublicAddress(address)) return true;
  if (targets === false || isIP(address) === 0 || !ipaddr.isValid(address)) return false;
  if (targets === true) return true;
  let ip = ipaddr.parse(address);
  if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).zoneId !== undefined) return false;
  if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  return rangesOf(targets).some(([network, bits]) => network.kind() === ip.kind() && ip.match(network, bits));
}
