import { ipLiteral } from "./address-policy.js";
import { isAllowedAddress, type PrivateTargets } from "./private-targets.js";

/**
 * The destination URL policy shared by registration (API) and delivery (dispatcher):
 * https only (spec "Endpoint scheme"), and no IP literal outside the public unicast space unless
 * ALLOW_PRIVATE_TARGETS allows it (`true`, or one of its ranges holds it; private-targets.ts). Host names are checked again on the address actually
 * connected to (see the dispatcher's lookup), since DNS can change between the two.
 */
export type UrlRefusal = "insecure_url" | "blocked_destination";

export function checkDestinationUrl(url: string, options: { allowPrivateTargets: PrivateTargets }): UrlRefusal | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "insecure_url";
  }
  if (parsed.protocol !== "https:") return "insecure_url";
  const literal = ipLiteral(parsed.hostname);
  if (literal && !isAllowedAddress(literal, options.allowPrivateTargets)) return "blocked_destination";
  return null;
}

/** Why a text is not an https:// destination (normalizeDestinationUrl). */
export type UrlProblem = "not_https_url" | "credentials";

/**
 * An https:// destination as it is stored: parsed by the WHATWG URL parser (what Node's fetch, got
 * and every browser use), and written back in its normalized form, `URL.href`: the host in ASCII
 * (IDNA: punycode for international names, full-width dots `。` as dots, so `https://127。0。0。1/`
 * is `https://127.0.0.1/`), letters of the scheme and host lowercased, the default port dropped,
 * the path percent-encoded, `/` for an empty path. What the address policy and the dispatcher read
 * is then what was stored. `text` must begin with `https://` as written (any letter case): the
 * parser's own leniency (leading spaces, `https:example.com`) is not accepted.
 * @returns the normalized URL, or the problem: not an absolute https:// URL with a host, or one carrying credentials
 */
export function normalizeDestinationUrl(text: string): { url: string } | { problem: UrlProblem } {
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return { problem: "not_https_url" };
  }
  if (parsed.protocol !== "https:" || !text.toLowerCase().startsWith("https://") || parsed.hostname.length === 0) {
    return { problem: "not_https_url" };
  }
  if (parsed.username || parsed.password) return { problem: "credentials" };
  return { url: parsed.href };
}
