import type { Request } from "express";
import type { ApiConfig } from "@mailhooks/config";

/**
 * The origin people open the API at: PUBLIC_URL when set (without a trailing slash), else the
 * request's own protocol and Host. Behind a TLS-terminating proxy the protocol is https when
 * TRUST_PROXY lets Express believe X-Forwarded-Proto. Used for the dashboard's sign-in links and
 * to decide whether its session cookie is Secure.
 */
export function publicBaseUrl(req: Request, config: Pick<ApiConfig, "PUBLIC_URL">): string {
  if (config.PUBLIC_URL) return config.PUBLIC_URL.replace(/\/+$/, "");
  return `${req.protocol}://${req.get("host") ?? "127.0.0.1"}`;
}

/** True when people reach the API over https (directly, through a trusted proxy, or by PUBLIC_URL). */
export function isHttps(req: Request, config: Pick<ApiConfig, "PUBLIC_URL">): boolean {
  if (config.PUBLIC_URL) return config.PUBLIC_URL.startsWith("https://");
  return req.secure;
}
