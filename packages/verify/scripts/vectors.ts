import { readFileSync } from "node:fs";
import type { WebhookEnvelope } from "../src/core.js";
import type { WebhookVerificationErrorCode } from "../src/verification-error.js";

/**
 * The shape of test-vectors.json, and its loader for the tests. One vector is one request as a
 * receiver sees it, and the one outcome every receiver must reach: the envelope, or an error code.
 */

export type VectorOutcome = { ok: true; envelope: WebhookEnvelope } | { ok: false; error: WebhookVerificationErrorCode };

export interface TestVector {
  name: string;
  description: string;
  /** Every secret the receiver holds (two during a rotation); the request passes if one matches. */
  secrets: string[];
  /** Request headers, names in the case a sender might use (a receiver matches them case-insensitively). */
  headers: Record<string, string>;
  /** The body's exact bytes, base64. */
  body_base64: string;
  /** The receiver's clock, Unix seconds. */
  now: number;
  tolerance_seconds: number;
  expected: VectorOutcome;
}

export interface TestVectorFile {
  description: string;
  checks_in_order: string[];
  /** Requests signed under the `service` scheme (X-Service-* headers). */
  vectors: TestVector[];
  /** Requests signed under the `standard` scheme (Standard Webhooks): verify them with `{scheme: "standard"}`. */
  standard: { description: string; checks_in_order: string[]; vectors: TestVector[] };
}

export const VECTORS_PATH = new URL("../test-vectors.json", import.meta.url);

/** The vectors of the `service` scheme. */
export function loadVectors(): TestVector[] {
  return (JSON.parse(readFileSync(VECTORS_PATH, "utf8")) as TestVectorFile).vectors;
}

/** The vectors of the `standard` scheme (Standard Webhooks). */
export function loadStandardVectors(): TestVector[] {
  return (JSON.parse(readFileSync(VECTORS_PATH, "utf8")) as TestVectorFile).standard.vectors;
}

export function bodyOf(vector: TestVector): Buffer {
  return Buffer.from(vector.body_base64, "base64");
}
