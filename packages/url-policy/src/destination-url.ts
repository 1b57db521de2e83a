import { ipLiteral, isPublicAddress } from "./address-policy.js";

/**
 * The destination URL policy shared by registration (API) and delivery (dispatcher):
 * https only (spec "Endpoint scheme"), and, unless private targets are allowed, no IP literal
 * outside the public unicast space. Host names are checked again on the address actually
 * connected to (see the dispatcher's lookup), since DNS can change between the two.
 */
export type UrlRefusal = "insecure_url" | "blocked_destination";

export function checkDestinationUrl(url: string, options: { allowPrivateTargets: boolean }): UrlRefusal | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "insecure_url";
  }
  if (parsed.protocol !== "https:") return "insecure_url";
  const literal = ipLiteral(parsed.hostname);
  if (literal && !options.allowPrivateTargets && !isPublicAddress(literal)) return "blocked_destination";
  return null;
}
