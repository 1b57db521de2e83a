import Ajv2020, { type ValidateFunction } from "ajv/dist/2020.js";
import { createOpenApiDocument } from "../../apps/api/src/openapi/document.js";

/**
 * Holds every answer the end-to-end tests get from the API to the OpenAPI document
 * (GET /openapi.json; docs/api.md, "A typed client"): the operation is found by method and path, the
 * status must be one it describes, and the body (JSON Schema 2020-12, through ajv) and required
 * headers must match that status's response. A path or method the document does not have must
 * answer as its description says of unknown routes: 404 `NotFound` (under /v1, 401, 429 or 503
 * may come first, since the key is checked before the route).
 */

type Json = Record<string, any>;

const doc = createOpenApiDocument() as Json;
const ajv = new Ajv2020({ strict: false, allErrors: true });
// ajv knows no formats by itself; these are the two the document uses.
ajv.addFormat("date-time", (value: string) => !Number.isNaN(Date.parse(value)));
ajv.addFormat("uri", (value: string) => URL.canParse(value));
ajv.addSchema(doc, "openapi.json");

const METHODS = ["get", "post", "put", "patch", "delete"] as const;
/** Express matches routes case-insensitively and ignores one trailing slash. */
const routes = Object.entries(doc.paths as Json).map(([template, item]) => ({
  template,
  item: item as Json,
  pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}/?$`, "i"),
}));

const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");
const validators = new Map<string, ValidateFunction>();
function validatorAt(ref: string): ValidateFunction {
  let validate = validators.get(ref);
  if (!validate) {
    validate = ajv.compile({ $ref: `openapi.json#/${ref}` });
    validators.set(ref, validate);
  }
  return validate;
}

/** A response object and where it lives, following a `$ref` to components/responses. */
function resolveResponse(response: Json, at: string[]): { response: Json; at: string[] } {
  const ref = response.$ref as string | undefined;
  if (!ref) return { response, at };
  const name = ref.replace("#/components/responses/", "");
  return { response: doc.components.responses[name], at: ["components", "responses", name] };
}

const UNKNOWN_ROUTE_STATUSES_UNDER_V1: Record<number, string> = {
  401: "Unauthorized",
  404: "NotFound",
  429: "RateLimited",
  500: "InternalError",
  503: "Unavailable",
};

/** The response object the document gives for this answer, or why there is none. */
function describedResponse(method: string, urlPath: string, status: number): { response: Json; at: string[] } | string {
  const pathname = urlPath.split("?")[0];
  const route = routes.find((r) => r.pattern.test(pathname));
  const lookup = method.toLowerCase() === "head" ? "get" : method.toLowerCase();
  const operation = route && METHODS.includes(lookup as (typeof METHODS)[number]) ? (route.item[lookup] as Json | undefined) : undefined;
  if (!route || !operation) {
    const underV1 = /^\/v1(\/|$)/i.test(pathname);
    const name = underV1 ? UNKNOWN_ROUTE_STATUSES_UNDER_V1[status] : status === 404 ? "NotFound" : undefined;
    if (!name) return `${method} ${pathname} is not in the document, so it must answer 404 (the NotFound response), not ${status}`;
    return resolveResponse({ $ref: `#/components/responses/${name}` }, []);
  }
  const responses = operation.responses as Json;
  const key = [String(status), `${String(status)[0]}XX`, "default"].find((k) => k in responses);
  if (!key)
    return `the document does not describe status ${status} of ${method.toUpperCase()} ${route.template} (it has ${Object.keys(responses).join(", ")})`;
  return resolveResponse(responses[key], ["paths", route.template, lookup, "responses", key]);
}

export interface CheckedAnswer {
  status: number;
  headers: Headers;
  /** The raw body text. */
  text: string;
  /** The body parsed as JSON, when it is JSON. */
  body: unknown;
}

/**
 * Throws an Error naming every difference between `answer` and what the document says of
 * `method urlPath` answering `answer.status`.
 */
export function checkAgainstDocument(method: string, urlPath: string, answer: CheckedAnswer): void {
  const found = describedResponse(method, urlPath, answer.status);
  const where = `${method} ${urlPath} answered ${answer.status}`;
  if (typeof found === "string") throw new Error(`OpenAPI: ${found}; body: ${answer.text.slice(0, 300)}`);
  const { response, at } = found;
  const problems: string[] = [];
  for (const [name, header] of Object.entries((response.headers ?? {}) as Json)) {
    const value = answer.headers.get(name);
    if (value === null) {
      if (header.required) problems.push(`header ${name} is missing`);
      continue;
    }
    const validate = validatorAt(pointer(...at, "headers", name, "schema"));
    if (!validate(value)) problems.push(`header ${name}: ${ajv.errorsText(validate.errors)}`);
  }
  const content = response.content as Json | undefined;
  if (!content) {
    if (answer.text !== "" && method.toLowerCase() !== "head") problems.push("the document describes no body, but there is one");
  } else if (method.toLowerCase() !== "head") {
    const type = (answer.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    if (!(type in content)) {
      problems.push(`Content-Type ${type || "(none)"} is not one of ${Object.keys(content).join(", ")}`);
    } else {
      const validate = validatorAt(pointer(...at, "content", type, "schema"));
      const value = type === "application/json" ? answer.body : answer.text;
      if (!validate(value))
        problems.push(
          ...(validate.errors ?? [])
            .slice(0, 10)
            .map((e) => `body${e.instancePath} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`),
        );
    }
  }
  if (problems.length > 0)
    throw new Error(
      `OpenAPI: ${where}, which does not match the document (${pointer(...at)}):\n- ${problems.join("\n- ")}\nbody: ${answer.text.slice(0, 500)}`,
    );
}
