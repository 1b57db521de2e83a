import { AppError } from "../errors.js";
import { classifyError } from "./classify-error.js";

/** classify-error.ts: one classifier for the API's and the dashboard's error handlers. */
describe("classifyError", () => {
  test("an AppError is a refusal, answered as it is", () => {
    const refusal = new AppError("conflict", "several_destinations", "several");
    expect(classifyError(refusal)).toEqual({ kind: "refusal", error: refusal });
  });

  test.each([
    ["entity.parse.failed", "invalid_json", "body_not_json"],
    ["encoding.invalid.utf8", "invalid_json", "body_not_utf8"],
    ["entity.too.large", "payload_too_large", "body_too_large"],
    ["charset.unsupported", "unsupported_media_type", "encoding_unsupported"],
    ["request.aborted", "invalid_json", "body_unreadable"],
  ])("body-parser's %s is a parser error: %s (%s)", (type, code, reason) => {
    const { kind, error } = classifyError(Object.assign(new Error("whatever the library says"), { type, status: 400, expose: true }));
    expect({ kind, code: error.code, reason: error.reason }).toEqual({ kind: "parser", code, reason });
  });

  test.each([
    ["a path that is not percent-encoding", new URIError("URI malformed"), "not_found", "path_not_decodable"],
    [
      "a file path send refuses (403)",
      Object.assign(new Error("Forbidden"), { status: 403, expose: true }),
      "not_found",
      "resource_not_found",
    ],
    [
      "a 413 of another parser",
      Object.assign(new Error("too many parameters"), { status: 413, expose: true }),
      "payload_too_large",
      "body_too_large",
    ],
    [
      "a body that cannot be decompressed",
      Object.assign(new Error("incorrect header check"), { status: 400, expose: true }),
      "invalid_json",
      "body_unreadable",
    ],
    [
      "a NUL refused by PostgreSQL",
      Object.assign(new Error("invalid byte sequence"), { code: "22021" }),
      "validation_error",
      "unstorable_value",
    ],
    [
      "a date out of range, through Prisma's adapter",
      Object.assign(new Error("Invalid prisma.event.create() invocation"), {
        meta: { driverAdapterError: { cause: { kind: "postgres", originalCode: "22008" } } },
      }),
      "validation_error",
      "unstorable_value",
    ],
  ])("%s is a client error", (_name, thrown, code, reason) => {
    const { kind, error } = classifyError(thrown);
    expect({ kind, code: error.code, reason: error.reason }).toEqual({ kind: "client", code, reason });
  });

  test("a 5xx http-error, or one not meant to be shown, is not a client error", () => {
    expect(classifyError(Object.assign(new Error("x"), { status: 500, expose: false })).kind).toBe("unknown");
    expect(classifyError(Object.assign(new Error("x"), { status: 400, expose: false })).kind).toBe("unknown");
  });

  test("PostgreSQL away is an infrastructure error: 503", () => {
    const { kind, error } = classifyError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }));
    expect({ kind, code: error.code, status: error.status }).toEqual({ kind: "infrastructure", code: "unavailable", status: 503 });
  });

  test("anything else is unknown: a 500 naming a fresh id, not the error's text", () => {
    const a = classifyError(new TypeError("cannot read properties of undefined"));
    const b = classifyError(new TypeError("cannot read properties of undefined"));
    expect(a.kind).toBe("unknown");
    expect(a.error.status).toBe(500);
    expect(a.error.message).toBe(`internal error ${a.errorId}`);
    expect(a.errorId).not.toBe(b.errorId);
  });
});
