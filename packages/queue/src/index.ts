/** BullMQ queue definitions shared by the API and the dispatcher. */
export * from "./names.js";
export * from "./jobs.js";
export * from "./connection.js";
export * from "./producer.js";
export * from "./metrics.js";
