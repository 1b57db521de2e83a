/** Event kinds, the zod schemas of their data (RFC 5322 addresses included), and the signed envelope's serialization. */
export * from "./kinds.js";
export * from "./addresses.js";
export * from "./schemas.js";
export * from "./envelope.js";
export * from "./examples.js";
export * from "./operational.js";
