import { timingSafeEqual, createHash } from "node:crypto";
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { ExpressAdapter } from "@bull-board/express";
import type { Queue } from "bullmq";
import type { RequestHandler, Router } from "express";

/**
 * The operators' queue board (Bull Board) at /admin/queues, behind HTTP basic authentication.
 * Mounted only when ADMIN_USERNAME and ADMIN_PASSWORD are both set.
 */

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

/** Basic auth compared in constant time (on digests, so lengths never leak either). */
export function basicAuth(username: string, password: string): RequestHandler {
  const expected = digest(`${username}:${password}`);
  return (req, res, next) => {
    const match = /^Basic\s+([A-Za-z0-9+/=]+)$/.exec(req.headers.authorization ?? "");
    const given = match ? Buffer.from(match[1], "base64").toString("utf8") : "";
    if (match && timingSafeEqual(digest(given), expected)) return next();
    res.setHeader("WWW-Authenticate", 'Basic realm="queues", charset="UTF-8"');
    res.status(401).json({ error: { code: "unauthorized", message: "operator credentials required" } });
  };
}

export const ADMIN_PATH = "/admin/queues";

export function queueBoard(queues: Queue[]): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(ADMIN_PATH);
  createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: false })), serverAdapter });
  return serverAdapter.getRouter() as Router;
}
