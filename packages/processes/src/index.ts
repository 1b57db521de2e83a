/**
 * Child processes for the tests, the benchmark and the demo: the service's own processes or any
 * program, and a private `redis-server`. Never used by the service itself.
 */
export * from "./process.js";
export * from "./redis-server.js";
export * from "./wait.js";
