import type { RequestHandler } from "express";
import type { PrismaClient } from "@mailhooks/db";
import { AppError } from "../errors.js";
import { authenticateKey, type Principal } from "../services/api-keys.js";

declare module "express-serve-static-core" {
  interface Request {
    principal?: Principal;
  }
}

/** Bearer authentication of every /v1 route (CONTRACT.md section 3): 401 unless the key is live. */
export function requireApiKey(prisma: PrismaClient): RequestHandler {
  return async (req, _res, next) => {
    const header = req.headers.authorization ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new AppError("unauthorized", "missing or malformed Authorization: Bearer <API_KEY> header", undefined, { "WWW-Authenticate": "Bearer" });
    const principal = await authenticateKey(prisma, match[1]);
    if (!principal) throw new AppError("unauthorized", "unknown or revoked API key", undefined, { "WWW-Authenticate": "Bearer" });
    req.principal = principal;
    next();
  };
}

/** The authenticated principal; only valid behind requireApiKey. */
export function principalOf(req: { principal?: Principal }): Principal {
  if (!req.principal) throw new AppError("unauthorized", "not authenticated");
  return req.principal;
}
