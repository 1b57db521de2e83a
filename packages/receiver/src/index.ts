/**
 * Every HTTPS receiver of the tests, the benchmark and the demo: the reference receiver, the
 * hostile one, the HTTPS listener they share, and their local certificate.
 */
export * from "./certs.js";
export * from "./hostile.js";
export * from "./https-server.js";
export * from "./receiver.js";
