import { z } from "zod";
import type { ZodOpenApiResponseObject, ZodOpenApiResponsesObject } from "zod-openapi";
import { errorBodySchema } from "../schemas/errors.js";

/**
 * The error answers of the OpenAPI document (docs/api.md, "Errors"), each a reusable component
 * with the `Error` body. `errorResponses` gives an operation the ones it can answer with, plus
 * those every /v1 operation can (401, 429, 500, 503); a status's description may be replaced by
 * one that says when this operation answers it.
 */

export type ErrorStatus = 400 | 401 | 404 | 409 | 410 | 413 | 415 | 422 | 429 | 500 | 503;

const json = { "application/json": { schema: errorBodySchema } };

const ERRORS: Record<ErrorStatus, { id: string; code: string; description: string; headers?: z.ZodObject }> = {
  400: { id: "InvalidJson", code: "invalid_json", description: "the body is not parseable JSON" },
  401: {
    id: "Unauthorized",
    code: "unauthorized",
    description: "missing, unknown or revoked API key",
    headers: z.object({ "WWW-Authenticate": z.literal("Bearer") }),
  },
  404: {
    id: "NotFound",
    code: "not_found",
    description: "no such resource for this account (another account's resources answer 404 too), or no such route",
  },
  409: { id: "Conflict", code: "conflict", description: "the request cannot apply to the resource's state" },
  410: { id: "PayloadExpired", code: "payload_expired", description: "the event's payload is past retention" },
  413: { id: "PayloadTooLarge", code: "payload_too_large", description: "JSON body over 256 KiB, raw message over 10 MiB" },
  415: { id: "UnsupportedMediaType", code: "unsupported_media_type", description: "wrong Content-Type" },
  422: {
    id: "ValidationError",
    code: "validation_error",
    description: "well-formed but invalid input; `details` names each offending field",
  },
  429: {
    id: "RateLimited",
    code: "rate_limited",
    description: "too many requests: from this account (RATE_LIMIT_PER_MINUTE), or from this address without a valid key",
    headers: z.object({ "Retry-After": z.string().regex(/^\d+$/).meta({ description: "seconds to wait" }) }),
  },
  500: { id: "InternalError", code: "internal_error", description: "an unexpected error; the message carries an id that is also logged" },
  503: { id: "Unavailable", code: "unavailable", description: "PostgreSQL is unreachable; nothing was written" },
};

const shared = new Map<ErrorStatus, ZodOpenApiResponseObject>();

function errorResponse(status: ErrorStatus, description?: string): ZodOpenApiResponseObject {
  const { id, code, description: generic, headers } = ERRORS[status];
  const response = (extra: object): ZodOpenApiResponseObject => ({
    ...extra,
    description: `\`${code}\`: ${description ?? generic}`,
    ...(headers ? { headers } : {}),
    content: json,
  });
  // An operation-specific description makes an inline response; otherwise the shared component,
  // which zod-openapi recognises by identity.
  if (description) return response({});
  if (!shared.has(status)) shared.set(status, response({ id }));
  return shared.get(status)!;
}

/** The statuses every /v1 operation may answer with. */
const V1_ALWAYS: ErrorStatus[] = [401, 429, 500, 503];

/**
 * The error responses of a /v1 operation: `statuses` (a description of when, or `true` for the
 * generic one) and the ones every /v1 operation has.
 */
export function errorResponses(statuses: Partial<Record<ErrorStatus, string | true>>): ZodOpenApiResponsesObject {
  const all: Partial<Record<ErrorStatus, string | true>> = { ...Object.fromEntries(V1_ALWAYS.map((s) => [s, true])), ...statuses };
  return Object.fromEntries(
    Object.keys(all)
      .map(Number)
      .sort((a, b) => a - b)
      .map((status) => {
        const why = all[status as ErrorStatus];
        return [String(status), errorResponse(status as ErrorStatus, why === true ? undefined : why)];
      }),
  );
}

/** The errors of an operation that reads a JSON body: unparseable, too large, wrong type, invalid. */
export const JSON_BODY_ERRORS = { 400: true, 413: true, 415: true, 422: true } as const;
