/** Event kinds, the zod schemas of their data, and the signed envelope's serialization. */
export * from "./kinds.js";
export * from "./schemas.js";
export * from "./envelope.js";
