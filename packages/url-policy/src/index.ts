/** Which destinations may be delivered to (docs/configuration.md, ALLOW_PRIVATE_TARGETS). */
export * from "./address-policy.js";
export * from "./destination-url.js";
export * from "./lookup.js";
export * from "./private-targets.js";
