/**
 * Who may act for an account: API keys (issued, listed, revoked, authenticated), and the
 * dashboard's one-time sign-in links and sessions, each tied to a key. Shared by the API (which
 * authenticates every /v1 request and every dashboard page) and the command-line tools (which
 * issue keys and links).
 */
export * from "./api-keys.js";
export * from "./dashboard-links.js";
export * from "./sessions.js";
export * from "./key-cache.js";
