/**
 * The one owner of delivery state (CONTRIBUTING.md, Habits 9): every write of the statuses and counters
 * of destinations, events, replays and test deliveries, and of the outbox that carries accepted
 * work to the queue, with the rules of docs/api.md, "Events". The API and the dispatcher call
 * these functions; neither writes those tables itself.
 */
export * from "./db.js";
export * from "./batcher.js";
export * from "./status.js";
export * from "./outbox.js";
export * from "./leases.js";
export * from "./ingest.js";
export * from "./webhooks.js";
export * from "./webhook-registration.js";
export * from "./replays.js";
export * from "./attempts.js";
export * from "./sweep.js";
export * from "./idempotency-keys.js";
export * from "./retention.js";
export * from "./retry-policy.js";
