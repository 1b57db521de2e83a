import type { z } from "zod";
import type { ZodOpenApiOperationObject } from "zod-openapi";
import { errorResponses, JSON_BODY_ERRORS } from "../responses.js";

/** `content` of a JSON request or response body. */
export const json = (schema: z.ZodType) => ({ "application/json": { schema } });

/**
 * A GET of a list (one page, newest first): `query` its query parameters, `page` the page's
 * schema, `what` the 200's description ("a page of ..."); 422 when the query is invalid.
 */
export const listOperation = (op: {
  operationId: string;
  tags: string[];
  summary: string;
  description: string;
  query: z.ZodObject;
  page: z.ZodType;
  what: string;
}): ZodOpenApiOperationObject => ({
  operationId: op.operationId,
  tags: op.tags,
  summary: op.summary,
  description: op.description,
  requestParams: { query: op.query },
  responses: { "200": { description: op.what, content: json(op.page) }, ...errorResponses({ 422: true }) },
});

/**
 * A POST that creates one resource and takes an Idempotency-Key header (`idempotency`, its
 * description saying what a repeat answers): 201 with `result` when created (`created`), 200 with
 * the first one for a repeat of the key (`repeated`); the JSON body's errors, and 409 (`conflict`).
 */
export const createOperation = (op: {
  operationId: string;
  tags: string[];
  summary: string;
  description: string;
  idempotency: { header: z.ZodObject };
  body: z.ZodType;
  result: z.ZodType;
  repeated: string;
  created: string;
  conflict: string;
}): ZodOpenApiOperationObject => ({
  operationId: op.operationId,
  tags: op.tags,
  summary: op.summary,
  description: op.description,
  requestParams: op.idempotency,
  requestBody: { required: true, content: json(op.body) },
  responses: {
    "200": { description: op.repeated, content: json(op.result) },
    "201": { description: op.created, content: json(op.result) },
    ...errorResponses({ ...JSON_BODY_ERRORS, 409: op.conflict }),
  },
});
