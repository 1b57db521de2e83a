import { timingSafeEqual, createHash } from "node:crypto";
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { ExpressAdapter } from "@bull-board/express";
import type { Queue } from "bullmq";
import type { RequestHandler, Router } from "express";
import { clientKeyOf } from "./auth.js";
import type { FailureLimiter } from "./failure-limiter.js";

/**
 * The operators' queue board (Bull Board) at /admin/queues, on the admin listener only
 * (ADMIN_HOST:ADMIN_PORT), behind HTTP basic authentication whose failures are rate limited per
 * client address.
 */

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

/**
 * Basic auth compared in constant time (on digests, so lengths never leak either). An address
 * past its allowance of failed attempts gets 429 without its credentials being looked at; IPv6
 * addresses are counted per /64 (clientKeyOf), or one host could try with each of its 2^64.
 */
export function basicAuth(username: string, password: string, failures: FailureLimiter): RequestHandler {
  const expected = digest(`${username}:${password}`);
  return async (req, res, next) => {
    const address = clientKeyOf(req.ip ?? req.socket.remoteAddress ?? "unknown");
    const offered = req.headers.authorization !== undefined;
    // A request without credentials is how a browser asks for the login prompt: not an attempt.
    const wait = offered ? await failures.reserve(address) : 0;
    if (wait > 0) {
      res.setHeader("Retry-After", String(wait));
      res.status(429).json({ error: { code: "rate_limited", message: `too many failed sign-ins from this address; retry in ${wait} s` } });
      return;
    }
    const match = /^Basic\s+([A-Za-z0-9+/=]+)$/.exec(req.headers.authorization ?? "");
    const given = match ? Buffer.from(match[1], "base64").toString("utf8") : "";
    if (match && timingSafeEqual(digest(given), expected)) {
      await failures.release(address);
      return next();
    }
    res.setHeader("WWW-Authenticate", 'Basic realm="queues", charset="UTF-8"');
    res.status(401).json({ error: { code: "unauthorized", message: "operator credentials required" } });
  };
}

export const ADMIN_PATH = "/admin/queues";

/** The board over `queues`; read-only (no retry, remove, promote, clean) unless `readWrite`. */
export function queueBoard(queues: Queue[], readWrite: boolean): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(ADMIN_PATH);
  createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: !readWrite })), serverAdapter });
  return serverAdapter.getRouter() as Router;
}
