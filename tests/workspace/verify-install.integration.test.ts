import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import getPort from "get-port";
import { runProcess, startProcess, type RunOptions, type StartedProcess } from "@mailhooks/processes";
import { signPayload } from "@mailhooks/signing";
import { testCertDir } from "../support/env.js";
import { waitUntil } from "../support/wait.js";

/**
 * @mailhooks/verify installed as its README says, into new projects outside the repository: one
 * CommonJS and one ESM project take the clone's folder after the root's `npm run build`, a second
 * CommonJS one takes the `npm pack` tarball. In each, the README's two whole receivers (Node's
 * https and Express) compile with `tsc --strict` (module nodenext) and run: they answer 204 to
 * what the service signs, process each X-Service-Event-Id once, and answer 401 with the code
 * otherwise.
 *
 * Only the README's `npm install` lines run (with --offline: the package has no dependency);
 * express and the type packages, which a user installs from the registry, are linked from this
 * repository's node_modules so that the test needs no network.
 */
/** Runs a command to its end; an exit other than 0 rejects, with its output. */
const run = (command: string, args: string[], options: RunOptions = {}) => runProcess(command, args, { ...options, check: true });
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const packageReadme = readFileSync(path.join(root, "packages/verify/README.md"), "utf8");
const tsc = path.join(root, "node_modules/typescript/bin/tsc");
// Without jest's NODE_OPTIONS (--experimental-vm-modules) in the children.
const env = { NODE_OPTIONS: "" };

/**
 * The fenced blocks of `language` in the README's part that starts with the heading `heading`,
 * up to the next heading of its level or higher (lines inside fences are never headings).
 */
function blocksUnder(heading: string, language: string): string[] {
  const level = heading.indexOf(" ");
  const blocks: string[] = [];
  let inside = false;
  let fence: string[] | null = null;
  let fenceLanguage = "";
  for (const line of packageReadme.split("\n")) {
    if (fence) {
      if (line === "```") {
        if (inside && fenceLanguage === language) blocks.push(fence.join("\n") + "\n");
        fence = null;
      } else fence.push(line);
      continue;
    }
    if (line.startsWith("```")) {
      fence = [];
      fenceLanguage = line.slice(3);
      continue;
    }
    const hashes = /^(#+) /.exec(line)?.[1].length;
    if (line === heading) inside = true;
    else if (hashes !== undefined && hashes <= level) inside = false;
  }
  expect(blocks.length).toBeGreaterThan(0);
  return blocks;
}

/** The README's commands to run in your project (after `# in your project`) of one install block, with the clone's path. */
function projectCommands(block: string): string[] {
  const lines = block.split("\n");
  return lines
    .slice(lines.indexOf("# in your project") + 1)
    .filter((line) => line.trim() !== "")
    .map((line) => line.replaceAll("/path/to/clone", root));
}

/** Runs one README `npm install …` line in `cwd`, offline. */
async function npmInstall(line: string, cwd: string): Promise<void> {
  const [command, verb, ...args] = line.split(" ");
  expect([command, verb]).toEqual(["npm", "install"]);
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", ...args], { cwd, env });
}

const [linkBlock, packBlock] = blocksUnder("# @mailhooks/verify", "sh");
const RECEIVERS = { node: blocksUnder("## Node", "ts")[0], express: blocksUnder("### Express (4 and 5)", "ts")[0] };
const USER_PACKAGES = ["express", "@types/express", "@types/node"];
const SECRET = "whsec_install_test_6a1f";

interface Project {
  kind: "commonjs" | "module";
  dir: string;
}

let scratch: string;
const projects = new Map<string, Project>();
const children: StartedProcess[] = [];

beforeAll(async () => {
  // The clone's part of the README: `npm run build` (its `npm ci` is this checkout's install).
  expect(linkBlock.split("\n")).toContain("npm ci && npm run build");
  // Without the CommonJS build of an earlier run, so that this build has to make it.
  const dist = path.join(root, "packages/verify/dist");
  for (const made of ["cjs", "tsconfig.cjs.tsbuildinfo"]) rmSync(path.join(dist, made), { recursive: true, force: true });
  await run("npm", ["run", "-s", "build"], { cwd: root, env });
  scratch = mkdtempSync(path.join(os.tmpdir(), "mailhooks-verify-install-"));

  const tarballs = path.join(scratch, "tarballs");
  mkdirSync(tarballs);
  // The pack block's first line, with the clone's path and this run's folder for /tmp.
  const [packLine] = packBlock.split("\n");
  expect(packLine).toBe("cd /path/to/clone/packages/verify && npm pack --pack-destination /tmp");
  // --ignore-scripts: its prepack would build again what the root build has just made (and
  // write into dist while packages/verify/test/package.integration.test.ts may pack too).
  await run("npm", ["pack", "--ignore-scripts", "--pack-destination", tarballs], { cwd: path.join(root, "packages/verify"), env });
  const [tarball] = readdirSync(tarballs);
  expect(projectCommands(packBlock)).toEqual([`npm install /tmp/${tarball}`]);

  const setups = [
    { name: "commonjs, linked to the clone", kind: "commonjs", commands: projectCommands(linkBlock) },
    { name: "ESM, linked to the clone", kind: "module", commands: projectCommands(linkBlock) },
    {
      name: "commonjs, from the packed tarball",
      kind: "commonjs",
      commands: projectCommands(packBlock).map((line) => line.replace("/tmp/", `${tarballs}/`)),
    },
  ] as const;
  for (const setup of setups) {
    const dir = path.join(scratch, `project-${projects.size}`);
    mkdirSync(path.join(dir, "src"), { recursive: true });
    writeFileSync(
      path.join(dir, "package.json"),
      JSON.stringify({ name: `scratch-${projects.size}`, private: true, type: setup.kind }, null, 2),
    );
    for (const line of setup.commands) await npmInstall(line, dir);
    for (const name of USER_PACKAGES) {
      mkdirSync(path.dirname(path.join(dir, "node_modules", name)), { recursive: true });
      symlinkSync(path.join(root, "node_modules", name), path.join(dir, "node_modules", name), "dir");
    }
    writeFileSync(
      path.join(dir, "tsconfig.json"),
      JSON.stringify(
        {
          compilerOptions: {
            module: "nodenext",
            target: "es2022",
            strict: true,
            skipLibCheck: true,
            outDir: "dist",
            rootDir: "src",
            types: ["node"],
          },
          include: ["src"],
        },
        null,
        2,
      ),
    );
    for (const [name, source] of Object.entries(RECEIVERS)) writeFileSync(path.join(dir, "src", `${name}.ts`), source);
    projects.set(setup.name, { kind: setup.kind, dir });
  }
}, 600_000);

afterAll(async () => {
  await Promise.all(children.map((child) => child.stop()));
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** POSTs `envelope` to `url` as the dispatcher does (signed now, X-Service-Event-Id `id`). */
function deliver(url: string, envelope: unknown, id: string | null, secret = SECRET) {
  const body = JSON.stringify(envelope);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "X-Service-Timestamp": timestamp,
    "X-Service-Signature": signPayload(secret, timestamp, body),
  };
  if (id !== null) headers["X-Service-Event-Id"] = id;
  return fetch(url, { method: "POST", headers, body });
}

/** Starts a compiled receiver and resolves once it answers over HTTPS. */
async function startReceiver(dir: string, name: string): Promise<{ url: string; lines: () => string[] }> {
  const port = await getPort();
  const certs = testCertDir();
  const child = startProcess(name, process.execPath, [path.join(dir, "dist", `${name}.js`)], {
    cwd: dir,
    env: {
      ...env,
      WEBHOOK_SECRET: SECRET,
      TLS_CERT_FILE: path.join(certs, "localhost.crt"),
      TLS_KEY_FILE: path.join(certs, "localhost.key"),
      PORT: String(port),
    },
  });
  children.push(child);
  const url = `https://localhost:${port}/webhooks`;
  await waitUntil(
    async () => {
      if (!child.running()) throw new Error(`${name} exited with ${(await child.exited).code}: ${child.output()}`);
      return fetch(url).then(
        () => true,
        () => false,
      );
    },
    Boolean,
    30_000,
    100,
  ).catch((error: Error) => {
    throw new Error(`${name} did not listen on ${port}: ${error.message}; output: ${child.output()}`);
  });
  return { url, lines: () => child.stdout().split("\n").filter(Boolean) };
}

const COMMON = {
  messageId: "<install-1@example.com>",
  threadId: "thr_1",
  inboxId: "inb_1",
  from: "alice@example.com",
  to: ["bob@example.com"],
  subject: "Hello",
};
const SENT = { event: "message.sent", timestamp: 1795341600, data: { ...COMMON, status: "sent" } };
const BOUNCED = {
  event: "message.bounced",
  timestamp: 1795341660,
  data: { ...COMMON, bounceType: "hard", bounceCode: "5.1.1", bounceMessage: "no such user", bouncedAt: "2026-11-22T10:01:00Z" },
};

describe.each(["commonjs, linked to the clone", "ESM, linked to the clone", "commonjs, from the packed tarball"])(
  "@mailhooks/verify in a new %s project",
  (name) => {
    test("loads with the project's own module system", async () => {
      const { kind, dir } = projects.get(name)!;
      const script =
        kind === "commonjs"
          ? 'const v = require("@mailhooks/verify"); const e = require("@mailhooks/verify/express"); console.log(typeof v.verifyEvent, typeof e.verifyWebhook, require.resolve("@mailhooks/verify"))'
          : 'const v = await import("@mailhooks/verify"); const e = await import("@mailhooks/verify/express"); console.log(typeof v.verifyEvent, typeof e.verifyWebhook, import.meta.resolve("@mailhooks/verify"))';
      const { stdout } = await run(process.execPath, [...(kind === "module" ? ["--input-type=module"] : []), "-e", script], {
        cwd: dir,
        env,
      });
      expect(stdout.trim()).toMatch(new RegExp(`^function function .*/dist/${kind === "commonjs" ? "cjs" : "esm"}/index\\.js$`));
    });

    test("compiles the README's Node and Express receivers with tsc --strict (module nodenext)", async () => {
      const { dir } = projects.get(name)!;
      // tsc prints its errors on stdout (and exits 2): its stdout is the verdict.
      const result = await runProcess(process.execPath, [tsc, "-p", dir], { cwd: dir, env });
      expect(result.stdout).toBe("");
    }, 120_000);

    test.each(Object.keys(RECEIVERS))(
      "runs the README's %s receiver: 204 and each event id processed once, 401 with the code otherwise",
      async (receiver) => {
        const { dir } = projects.get(name)!;
        const { url, lines } = await startReceiver(dir, receiver);
        const first = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6b001";
        const second = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6b002";
        // A retry of the first event, and another event about the same message.
        for (const [envelope, id] of [
          [SENT, first],
          [SENT, first],
          [BOUNCED, second],
        ] as const)
          expect((await deliver(url, envelope, id)).status).toBe(204);
        const wrong = await deliver(url, SENT, first, "whsec_someone_else");
        expect(wrong.status).toBe(401);
        expect(await wrong.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
        const unkeyed = await deliver(url, SENT, null);
        expect(unkeyed.status).toBe(401);
        expect(((await unkeyed.json()) as { error: { code: string } }).error.code).toBe("missing_header");
        // Each processed event printed one line, starting with its id and kind, before its answer.
        await waitUntil(
          () => lines().length,
          (n) => n >= 2,
          2_000,
          20,
        );
        expect(lines().map((line) => line.split(" ").slice(0, 2).join(" "))).toEqual([
          `${first} message.sent`,
          `${second} message.bounced`,
        ]);
      },
      60_000,
    );
  },
);
