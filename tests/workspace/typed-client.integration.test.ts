import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess } from "@mailhooks/processes";
import { startStack, type Stack } from "../support/stack.js";

/**
 * The typed client of docs/api.md ("A typed client") as a new user makes it: a new ESM project
 * (`"type": "module"`, module nodenext, strict) in a clean folder, holding exactly the packages its
 * `npm install` lines name (linked from this repository's node_modules: no network; a pinned
 * version must be the one linked), the page's `npx openapi-typescript` line run as it stands
 * against a running API's /openapi.json, its TypeScript block compiled with `tsc --strict` (no
 * `types` in the tsconfig: TypeScript sees the @types the project has) and run against that API.
 *
 * The last test compiles calls a client makes beyond the page's (a rotation with the default
 * grace period): the generated types must accept every request the API accepts.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
// Without jest's NODE_OPTIONS (--experimental-vm-modules) in the children.
const env = { NODE_OPTIONS: "" };

/** The "A typed client" section's fenced blocks of `language`, in order. */
function clientBlocks(language: string): string[] {
  const page = readFileSync(path.join(root, "docs/api.md"), "utf8");
  const start = page.indexOf("\n## A typed client\n");
  expect(start).toBeGreaterThan(0);
  const end = page.indexOf("\n## ", start + 1);
  const section = page.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(new RegExp("^```" + language + "\\n([\\s\\S]*?)^```$", "gm"))].map((m) => m[1]);
}

/** A package of an `npm install` line: its name and the version it pins (`typescript@5`), if any. */
function packageOf(word: string): { name: string; pin: string | undefined } {
  const at = word.indexOf("@", 1);
  return at === -1 ? { name: word, pin: undefined } : { name: word.slice(0, at), pin: word.slice(at + 1) };
}

/** The packages the section's `npm install` lines name, in order. */
function installed(): { name: string; pin: string | undefined }[] {
  const [shell] = clientBlocks("sh");
  return shell
    .split("\n")
    .filter((line) => line.startsWith("npm install"))
    .flatMap((line) =>
      line
        .split(" ")
        .slice(2)
        .filter((word) => !word.startsWith("-")),
    )
    .map(packageOf);
}

let stack: Stack;
let project: string;
let tsc: string;

beforeAll(async () => {
  stack = await startStack();
  project = mkdtempSync(path.join(os.tmpdir(), "mailhooks-readme-client-"));
  mkdirSync(path.join(project, "src"));
  mkdirSync(path.join(project, "node_modules/.bin"), { recursive: true });
  writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "readme-client", private: true, type: "module" }, null, 2));
  writeFileSync(
    path.join(project, "tsconfig.json"),
    JSON.stringify(
      {
        compilerOptions: { module: "nodenext", target: "es2022", strict: true, outDir: "dist", rootDir: "src" },
        include: ["src"],
      },
      null,
      2,
    ),
  );
  // Exactly what the install lines name, in the versions they pin.
  for (const { name, pin } of installed()) {
    const version = (JSON.parse(readFileSync(path.join(root, "node_modules", name, "package.json"), "utf8")) as { version: string })
      .version;
    if (pin !== undefined)
      expect({ name, version }).toEqual({ name, version: expect.stringMatching(new RegExp(`^${pin.replace(/\./g, "\\.")}\\.`)) });
    mkdirSync(path.dirname(path.join(project, "node_modules", name)), { recursive: true });
    symlinkSync(path.join(root, "node_modules", name), path.join(project, "node_modules", name), "dir");
  }
  symlinkSync("../openapi-typescript/bin/cli.js", path.join(project, "node_modules/.bin/openapi-typescript"));
  tsc = path.join(project, "node_modules/typescript/bin/tsc");
}, 120_000);

afterAll(async () => {
  if (project) rmSync(project, { recursive: true, force: true });
  await stack?.close();
});

describe("docs/api.md, A typed client", () => {
  test("generates the types with the page's commands, then compiles (tsc --strict) and runs its client against the API", async () => {
    const [shell] = clientBlocks("sh");
    const lines = shell.split("\n").filter(Boolean);
    const installs = lines.filter((line) => line.startsWith("npm install"));
    // The client needs TypeScript 5 (openapi-typescript 7) and Node's types (it reads `process`).
    expect(installed()).toEqual(
      expect.arrayContaining([
        { name: "typescript", pin: "5" },
        { name: "@types/node", pin: undefined },
      ]),
    );
    const [generate] = lines.filter((line) => line.startsWith("npx "));
    expect(lines).toHaveLength(installs.length + 1);
    const [npx, ...args] = generate.replace("http://127.0.0.1:3000", stack.baseUrl).split(" ");
    expect(npx).toBe("npx");
    // stdin at its end (runProcess gives it /dev/null): a prompt (`Need to install the following packages`) would end the run, not hang it.
    await runProcess("npx", args, { cwd: project, env, timeoutMs: 120_000, check: true });
    expect(readFileSync(path.join(project, "src/mailhooks.ts"), "utf8")).toContain("export interface paths");

    const [client] = clientBlocks("ts");
    writeFileSync(path.join(project, "src/client.ts"), client);
    // tsc prints its errors on stdout (and exits 2): its stdout is the verdict.
    const compiled = await runProcess(process.execPath, [tsc, "-p", project], { cwd: project, env });
    expect(compiled.stdout).toBe("");

    const webhookUrl = "https://receiver.example.com/readme-client";
    const { stdout } = await runProcess(process.execPath, [path.join(project, "dist/client.js")], {
      cwd: project,
      env: { ...env, API_URL: stack.baseUrl, API_KEY: stack.apiKey, WEBHOOK_URL: webhookUrl },
      check: true,
    });
    const [created, failed] = stdout.trim().split("\n");
    const [id, secret] = created.split(" ");
    expect(id).toMatch(/^wh_/);
    expect(secret).toMatch(/^whsec_/);
    expect(failed).toBe("[]");
    const webhook = await stack.api("GET", `/v1/webhooks/${id}`);
    expect(webhook.status).toBe(200);
    expect(webhook.body).toMatchObject({ id, url: webhookUrl, events: ["message.sent", "message.bounced"] });
  }, 240_000);

  /**
   * Fails while the OpenAPI document gives `grace_seconds` (POST /v1/webhooks/{id}/secret/rotate)
   * a `default` that openapi-typescript turns into a required field: the generated
   * RotateSecretRequest then says `grace_seconds: number`, and a client cannot leave it out as the
   * API allows (docs/api.md, "Webhooks": default 86400). The schema is in apps/api/src/services/webhook-input.ts.
   */
  test("accepts a rotation with the default grace period (an empty body), as the API does", async () => {
    writeFileSync(
      path.join(project, "src/rotate.ts"),
      [
        'import createClient from "openapi-fetch";',
        'import type { paths } from "./mailhooks.js";',
        "",
        "const api = createClient<paths>({ baseUrl: process.env.API_URL!, headers: { authorization: `Bearer ${process.env.API_KEY}` } });",
        "export async function rotateWithDefaultGrace(id: string) {",
        '  return api.POST("/v1/webhooks/{id}/secret/rotate", { params: { path: { id } }, body: {} });',
        "}",
        "",
      ].join("\n"),
    );
    const compiled = await runProcess(process.execPath, [tsc, "-p", project], { cwd: project, env });
    rmSync(path.join(project, "src/rotate.ts"));
    expect(compiled.stdout).toBe("");
  }, 120_000);
});
