/**
 * The fair scheduler (CONTRIBUTING.md, Habits 9; docs/scheduler.md): what decides
 * whose delivery attempt runs next. The relay (packages/delivery-state relayOutbox) hands each
 * webhook at most its job limit; here, each attempt is admitted by its webhook's and account's
 * share of the dispatchers' slots and by the webhook's rate_limit; leases whose jobs are gone are
 * dropped. The worker asks; it does not count on its own.
 */
export * from "./admission.js";
export * from "./holds.js";
export * from "./shares.js";
export * from "./rate-limits.js";
export * from "./lease-keeper.js";
