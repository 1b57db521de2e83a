/** The reference HTTPS receiver and its local certificate. */
export * from "./certs.js";
export * from "./receiver.js";
