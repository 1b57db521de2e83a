import { randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { freePort, startProcess, type StartedProcess } from "@mailhooks/processes";
import { signatureHeaders, type RequestSigning } from "@mailhooks/signing";
import { testCertDir } from "../../tests/support/env.js";

/**
 * docs/receivers/standard-webhooks.md: its two Node receivers run as they stand, copied out of
 * the page, under tsx as a user would start them (WEBHOOK_SECRET, TLS_CERT_FILE, TLS_KEY_FILE,
 * PORT), and get requests signed by the service's own signing code (@mailhooks/signing, what the
 * dispatcher sends): the official library's receiver accepts the `standard` ones signed with its
 * secret, by either secret of a rotation, and refuses the others; the @mailhooks/verify one
 * accepts both schemes.
 */

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const page = readFileSync(path.join(root, "docs/receivers/standard-webhooks.md"), "utf8");
const blocks = [...page.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

// Inside the repository, so that the examples find express, standardwebhooks and @mailhooks/verify.
const work = path.join(root, ".tmp", "standard-webhooks-doc", randomUUID());
beforeAll(() => mkdirSync(work, { recursive: true }));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const secret = () => `whsec_${randomBytes(32).toString("base64")}`;
const BODY = JSON.stringify({ event: "message.sent", timestamp: 1795341600, data: { messageId: "<doc@example.com>", status: "sent" } });

/** Starts block `index` of the page with WEBHOOK_SECRET `secrets`; resolves once it answers. */
async function start(index: number, secrets: string[]): Promise<{ child: StartedProcess; url: string }> {
  const dir = path.join(work, String(index));
  mkdirSync(dir);
  writeFileSync(path.join(dir, "package.json"), '{ "type": "module", "private": true }\n');
  const program = path.join(dir, "receiver.ts");
  writeFileSync(program, blocks[index]);
  const port = await freePort();
  const child = startProcess(
    `docs block ${index}`,
    process.execPath,
    ["--conditions=source", "--import", pathToFileURL(require.resolve("tsx")).href, program],
    {
      cwd: dir,
      env: {
        NODE_OPTIONS: "",
        WEBHOOK_SECRET: secrets.join(","),
        TLS_CERT_FILE: path.join(testCertDir(), "localhost.crt"),
        TLS_KEY_FILE: path.join(testCertDir(), "localhost.key"),
        PORT: String(port),
      },
    },
  );
  const url = `https://localhost:${port}/webhooks`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (!child.running()) throw new Error(`the example exited with ${(await child.exited).code}: ${child.output()}`);
    if (
      await fetch(url).then(
        () => true,
        () => false,
      )
    )
      return { child, url };
    if (Date.now() > deadline) throw new Error(`the example did not listen on ${port}: ${child.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** POSTs BODY as the dispatcher signs it; answers the status. */
async function post(url: string, signing: RequestSigning, eventId: string, tamper = false): Promise<number> {
  const headers = signatureHeaders(signing, eventId, Math.floor(Date.now() / 1000), BODY);
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "X-Service-Event-Id": eventId, ...headers },
    body: tamper ? BODY.replace('"sent"}', '"SENT"}') : BODY,
  });
  await res.arrayBuffer();
  return res.status;
}

/** The lines `child` printed, once there are `count` (each is printed before its answer, but may still be in the pipe). */
async function linesOf(child: StartedProcess, count: number): Promise<string[]> {
  const lines = () => child.stdout().split("\n").filter(Boolean);
  for (let i = 0; i < 100 && lines().length < count; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  return lines();
}

describe("docs/receivers/standard-webhooks.md", () => {
  test("has the two Node receivers", () => {
    expect(blocks).toHaveLength(2);
    expect(blocks[0]).toContain('from "standardwebhooks"');
    expect(blocks[1]).toContain('from "@mailhooks/verify"');
  });

  test("the official library's receiver accepts standard requests signed with its secret (alone, or beside another during a rotation), once per webhook-id, and refuses the rest", async () => {
    const held = secret();
    const { child, url } = await start(0, [held]);
    try {
      expect(await post(url, { scheme: "standard", secrets: [held] }, "evt_doc_1")).toBe(204);
      expect(await post(url, { scheme: "standard", secrets: [secret(), held] }, "evt_doc_2")).toBe(204);
      expect(await post(url, { scheme: "standard", secrets: [held] }, "evt_doc_1")).toBe(204);
      expect(await post(url, { scheme: "standard", secrets: [secret()] }, "evt_doc_3")).toBe(401);
      expect(await post(url, { scheme: "standard", secrets: [held] }, "evt_doc_4", true)).toBe(401);
      expect(await post(url, { scheme: "service", secret: held }, "evt_doc_5")).toBe(401);
      expect(await linesOf(child, 2)).toEqual(["evt_doc_1 message.sent <doc@example.com>", "evt_doc_2 message.sent <doc@example.com>"]);
    } finally {
      await child.stop();
    }
  }, 180_000);

  test("the @mailhooks/verify receiver accepts both schemes, with either secret of a rotation, and refuses the rest", async () => {
    const [old, current] = [secret(), secret()];
    const { child, url } = await start(1, [old, current]);
    try {
      expect(await post(url, { scheme: "service", secret: old }, "evt_doc_1")).toBe(204);
      expect(await post(url, { scheme: "standard", secrets: [old, current] }, "evt_doc_2")).toBe(204);
      expect(await post(url, { scheme: "standard", secrets: [current] }, "evt_doc_3")).toBe(204);
      expect(await post(url, { scheme: "service", secret: secret() }, "evt_doc_4")).toBe(401);
      expect(await post(url, { scheme: "standard", secrets: [current] }, "evt_doc_5", true)).toBe(401);
      expect(await linesOf(child, 3)).toEqual([
        "service evt_doc_1 message.sent",
        "standard evt_doc_2 message.sent",
        "standard evt_doc_3 message.sent",
      ]);
    } finally {
      await child.stop();
    }
  }, 180_000);
});
