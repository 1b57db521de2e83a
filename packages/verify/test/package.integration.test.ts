import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess, type RunOptions } from "@mailhooks/processes";

// The package as a user gets it: built, packed, installed from the tarball into a folder
// outside the repository, then loaded from ESM and from CommonJS; publint and
// arethetypeswrong check the tarball's exports and types.
const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name: string) => path.resolve(packageDir, "../../node_modules/.bin", name);
// Without jest's NODE_OPTIONS (--experimental-vm-modules) in the children.
const env = { NODE_OPTIONS: "" };
/** Runs a command to its end; an exit other than 0 rejects, with its output. */
const run = (command: string, args: string[], options: RunOptions = {}) => runProcess(command, args, { ...options, check: true });

// Both builds answer every vector of both schemes like the sources do (the sources' own tests check that).
const CHECK = (load: string) => `
${load}
const file = JSON.parse(fs.readFileSync(vectorsPath, "utf8"));
const vectors = [
  ...file.vectors.map((v) => ({ ...v, scheme: "service" })),
  ...file.standard.vectors.map((v) => ({ ...v, scheme: "standard" })),
];
const outcome = async (run) => {
  try { return { ok: true, envelope: await run() }; }
  catch (error) { if (!isWebhookVerificationError(error)) throw error; return { ok: false, error: error.code }; }
};
(async () => {
  let checked = 0;
  for (const v of vectors) {
    const body = Buffer.from(v.body_base64, "base64");
    const options = { now: v.now, toleranceSeconds: v.tolerance_seconds, scheme: v.scheme };
    for (const got of [await outcome(() => node.verify(v.secrets, v.headers, body, options)), await outcome(() => web.verify(v.secrets, v.headers, body, options))]) {
      if (JSON.stringify(got) !== JSON.stringify(v.expected)) throw new Error(v.name + ": " + JSON.stringify(got));
      checked++;
    }
  }
  const adapters = [typeof express.verifyWebhook, typeof fastify.verifyWebhook, typeof hono.verifyWebhook, typeof next.withVerifiedWebhook];
  console.log(JSON.stringify({ checked, adapters, entry }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

const ESM = CHECK(`
import fs from "node:fs";
import * as node from "@mailhooks/verify";
import * as web from "@mailhooks/verify/web";
import * as express from "@mailhooks/verify/express";
import * as fastify from "@mailhooks/verify/fastify";
import * as hono from "@mailhooks/verify/hono";
import * as next from "@mailhooks/verify/next";
const { isWebhookVerificationError } = node;
const vectorsPath = new URL(import.meta.resolve("@mailhooks/verify/test-vectors.json"));
const entry = import.meta.resolve("@mailhooks/verify");
`);

const CJS = CHECK(`
const fs = require("node:fs");
const node = require("@mailhooks/verify");
const web = require("@mailhooks/verify/web");
const express = require("@mailhooks/verify/express");
const fastify = require("@mailhooks/verify/fastify");
const hono = require("@mailhooks/verify/hono");
const next = require("@mailhooks/verify/next");
const { isWebhookVerificationError } = node;
const vectorsPath = require.resolve("@mailhooks/verify/test-vectors.json");
const entry = require.resolve("@mailhooks/verify");
`);

let scratch: string;
let tarball: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), "mailhooks-verify-pack-"));
  // npm pack runs the package's prepack script: the ESM and CJS builds.
  await run("npm", ["pack", "--pack-destination", scratch], { cwd: packageDir, env });
  tarball = path.join(
    scratch,
    (await readdir(scratch)).find((f) => f.endsWith(".tgz"))!,
  );
  const app = path.join(scratch, "app");
  await mkdir(app);
  await writeFile(path.join(app, "package.json"), JSON.stringify({ name: "scratch-app", private: true }));
  await run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: app, env });
  await writeFile(path.join(app, "check.mjs"), ESM);
  await writeFile(path.join(app, "check.cjs"), CJS);
}, 60_000);

afterAll(() => rm(scratch, { recursive: true, force: true }));

describe("the packed @mailhooks/verify", () => {
  it("installs with no dependency", async () => {
    const app = path.join(scratch, "app");
    expect((await readdir(path.join(app, "node_modules"))).filter((f) => !f.startsWith("."))).toEqual(["@mailhooks"]);
    const manifest = JSON.parse(await readFile(path.join(app, "node_modules/@mailhooks/verify/package.json"), "utf8"));
    expect(manifest.dependencies ?? {}).toEqual({});
  });

  it("asks for Node 20 or later, the first whose global crypto.subtle needs no flag (the Web Crypto variant uses it)", async () => {
    const manifest = JSON.parse(await readFile(path.join(scratch, "app/node_modules/@mailhooks/verify/package.json"), "utf8"));
    expect(manifest.engines).toEqual({ node: ">=20" });
    expect(await readFile(path.join(packageDir, "src/web.ts"), "utf8")).toContain("crypto.subtle");
  });

  it.each([
    ["check.mjs", "dist/esm/index.js"],
    ["check.cjs", "dist/cjs/index.js"],
  ])("%s loads every entry point from %s and passes every vector", async (script, entry) => {
    const { stdout } = await run(process.execPath, [script], { cwd: path.join(scratch, "app"), env });
    const result = JSON.parse(stdout);
    expect(result.entry).toMatch(new RegExp(`node_modules/@mailhooks/verify/${entry}$`));
    expect(result.checked).toBeGreaterThanOrEqual(2 * 70);
    expect(result.adapters).toEqual(["function", "function", "function", "function"]);
  });

  it("passes publint", async () => {
    const { stdout } = await run(bin("publint"), ["run", tarball], { env });
    expect(stdout).toContain("All good!");
  });

  it("passes arethetypeswrong (ESM, CJS, bundlers and node10 type resolution)", async () => {
    // attw exits non-zero on any problem, which rejects here.
    const { stdout } = await run(bin("attw"), [tarball, "--format", "json"], { env });
    expect(JSON.parse(stdout).problems).toEqual({});
  });
});
