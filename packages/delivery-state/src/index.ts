/**
 * The one owner of delivery state: every write of the statuses and counters
 * of destinations, events, replays and test deliveries, and of the work queue that carries
 * accepted work to the dispatchers (docs/api.md, "Statuses"; docs/scheduler.md). The API and the
 * dispatcher call these functions; neither writes those tables itself.
 */
export * from "./db.js";
export * from "./batcher.js";
export * from "./status.js";
export * from "./work-queue.js";
export * from "./claim.js";
export * from "./ingest.js";
export * from "./webhooks.js";
export * from "./webhook-registration.js";
export * from "./replays.js";
export * from "./attempts.js";
export * from "./idempotency-keys.js";
export * from "./retention.js";
export * from "./retry-policy.js";
export * from "./notices.js";
export * from "./listen.js";
