import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import SwaggerParser from "@apidevtools/swagger-parser";
import { runProcess } from "@mailhooks/processes";
import { createOpenApiDocument, openApiFileText } from "../../apps/api/src/openapi/document.js";

/**
 * The OpenAPI document passes the two checkers an integrator is likely to run on it: Redocly's
 * `redocly lint` (its recommended rules) with no error, and @apidevtools/swagger-parser's
 * validation (the OpenAPI 3.1 schema and its $refs). Checked on the document the schemas generate,
 * written out as `openapi.json`: apps/api/src/openapi/document.test.ts holds the committed file
 * to be exactly that text.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const redocly = path.join(root, "node_modules/.bin/redocly");

interface LintProblem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: Array<{ pointer: string }>;
}

let dir: string;
let file: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "mailhooks-openapi-lint-"));
  file = path.join(dir, "openapi.json");
  writeFileSync(file, openApiFileText());
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("openapi.json", () => {
  test("passes `redocly lint` with no error, every component used and a licence named", async () => {
    // No telemetry nor update check: there is no network, and a lint must not wait on one.
    const env = { NODE_OPTIONS: "", REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" };
    // Its report whatever it exits with (1 on an error: the assertions below name them).
    const result = await runProcess(redocly, ["lint", file, "--format=json"], { cwd: dir, env });
    const report = JSON.parse(result.stdout) as { totals: { errors: number }; problems: LintProblem[] };
    const summary = report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    expect(summary.filter((line) => line.startsWith("error"))).toEqual([]);
    expect(report.totals.errors).toBe(0);
    // Warnings the document can avoid; operation-4xx-response stays for /healthz, /readyz and
    // /metrics, which answer no 4xx of their own.
    expect(summary.filter((line) => /no-unused-components|info-license|no-server/.test(line))).toEqual([]);
  }, 60_000);

  test("passes @apidevtools/swagger-parser's validation", async () => {
    await expect(SwaggerParser.validate(file)).resolves.toMatchObject({ openapi: "3.1.0" });
  });

  test("Delivery.error names every short code of the deliveries log (docs/api.md, 'Deliveries log')", () => {
    const delivery = createOpenApiDocument().components?.schemas?.Delivery as { properties: { error: { description: string } } };
    const codes = [
      "timeout",
      "connection_error",
      "tls_error",
      "dns_error",
      "blocked_destination",
      "insecure_url",
      "payload_expired",
      "internal_error",
    ];
    expect(codes.filter((code) => !delivery.properties.error.description.includes(code))).toEqual([]);
  });
});
