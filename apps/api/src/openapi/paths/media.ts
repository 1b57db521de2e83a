import type { z } from "zod";
import type { ZodOpenApiOperationObject } from "zod-openapi";
import { errorResponses } from "../responses.js";

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
