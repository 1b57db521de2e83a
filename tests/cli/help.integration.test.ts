import { readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess, type CompletedProcess } from "@mailhooks/processes";

/**
 * Every command (docs/operations.md, "Commands") explains itself: `--help` prints its usage and an
 * example and exits 0; an unknown option prints the error and the usage and exits 2. Each runs as
 * a real process, the way a user types it: `npm run -s <script> -- ...` for the commands that run
 * from source, and the sources of the built entry points (the API, the dispatcher, `npm start`)
 * under tsx, so that no build is needed.
 */

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const scripts: Record<string, string> = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).scripts;
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

type Run = CompletedProcess;

function run(command: string, args: string[]): Promise<Run> {
  // No database, Redis or API is needed to explain oneself: none is reachable here.
  const nowhere = "postgresql://nobody@127.0.0.1:1/none";
  return runProcess(command, args, {
    cwd: root,
    env: { NODE_OPTIONS: "", DATABASE_URL: nowhere, TEST_DATABASE_URL: nowhere, REDIS_URL: "redis://127.0.0.1:1", API_KEY: "" },
  });
}

/** `node <flags> apps/x/dist/main.js` of a start script, as the source it is built from, under tsx (no build needed). */
function fromSource(script: string): string[] {
  const entry = scripts[script].split(" ").find((part) => part.endsWith(".js") || part.endsWith(".mjs"))!;
  return [
    require.resolve("tsx/cli"),
    "--conditions=source",
    path.join(root, entry.replace("/dist/", "/src/").replace(/main\.js$/, "main.ts")),
  ];
}

/** Arguments a command needs besides the option under test (commander reports a missing one first). */
const REQUIRED: Record<string, string[]> = {
  replay: ["--since", "2026-11-01T00:00:00Z", "--until", "2026-11-02T00:00:00Z"],
  listen: ["--forward-to", "http://127.0.0.1:9/hooks"],
};

const commands: [label: string, invoke: (args: string[]) => Promise<Run>, required: string[]][] = [
  ...["keys", "replay", "listen", "db:migrate", "demo", "bench", "test", "test:unit", "build", "start", "openapi"].map(
    (script): [string, (args: string[]) => Promise<Run>, string[]] => [
      `npm run -s ${script}`,
      (args) => run(npm, ["run", "-s", script, "--", ...args]),
      REQUIRED[script] ?? [],
    ],
  ),
  ...["start:api", "start:dispatcher"].map((script): [string, (args: string[]) => Promise<Run>, string[]] => [
    `npm run ${script}`,
    (args) => run(process.execPath, [...fromSource(script), ...args]),
    [],
  ]),
];

describe("command lines", () => {
  test("the root scripts point at the entry points tested here", () => {
    expect(scripts.keys).toContain("apps/cli/src/keys.ts");
    expect(scripts.replay).toContain("apps/cli/src/replay.ts");
    expect(scripts.listen).toContain("apps/cli/src/listen.ts");
    expect(scripts["db:migrate"]).toContain("apps/cli/src/migrate.ts");
    expect(scripts.start).toContain("scripts/start-all.ts");
    expect(scripts.openapi).toContain("scripts/openapi.ts");
    expect(scripts.test).toBe("node scripts/test.mjs");
    expect(scripts.build).toBe("node scripts/build.mjs");
  });

  // Both used to start their work first: recreate the test database (failing without
  // PostgreSQL, unreachable here: see `run`), or hand --help to tsc, which printed its own.
  test.concurrent.each([
    ["test", "npm test -- tests/e2e/retry.test.ts", /TEST_DATABASE_URL[\s\S]*REDIS_URL/],
    ["build", "npm run build", /npm ci/],
  ])("the %s script's --help gives an example and what it needs, and does nothing else", async (script, example, needs) => {
    const res = await run(npm, ["run", "-s", script, "--", "--help"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(`$ ${example}\n`);
    expect(res.stdout).toMatch(/\nNeeds:/);
    expect(res.stdout).toMatch(needs);
  });

  // --help and usage errors come before any work: no build before `npm start`'s own, no
  // openapi.json written by `npm run openapi -- --help`.
  test("npm start has no prestart step: it answers --help before its own build", () => {
    expect(scripts.prestart).toBeUndefined();
  });

  test("npm run openapi -- --help or a bad option writes nothing", async () => {
    const file = path.join(root, "openapi.json");
    const before = statSync(file).mtimeMs;
    const help = await run(npm, ["run", "-s", "openapi", "--", "--help"]);
    const bogus = await run(npm, ["run", "-s", "openapi", "--", "--bogus"]);
    expect([help.code, bogus.code]).toEqual([0, 2]);
    expect(help.stdout).not.toContain("wrote");
    expect(statSync(file).mtimeMs).toBe(before);
  });

  test("replay --help says that --since and --until are required", async () => {
    const res = await run(npm, ["run", "-s", "replay", "--", "--help"]);
    expect(res.stdout).toMatch(/^Usage: npm run -s replay -- --since <ISO> --until <ISO> \[options\]\n/);
    expect(res.stdout).toMatch(/--since <ISO> +required: /);
  });

  describe.each(commands)("%s", (label, invoke, required) => {
    test.concurrent("--help prints the usage and an example, and exits 0", async () => {
      const res = await invoke(["--help"]);
      expect({ code: res.code, stderr: res.stderr.replace(/^npm warn .*\n/gm, "") }).toEqual({ code: 0, stderr: "" });
      expect(res.stdout).toMatch(/^Usage: /);
      expect(res.stdout).toMatch(/\nExamples?:\n {2}\$ /);
      expect(res.stdout).toContain(label.replace(/^npm run (-s )?/, ""));
    });

    test.concurrent("an unknown option prints the usage and exits 2", async () => {
      const res = await invoke([...required, "--no-such-option"]);
      expect(res.code).toBe(2);
      expect(res.stderr).toContain("unknown option '--no-such-option'");
      expect(res.stderr).toMatch(/\nUsage: /);
      expect(res.stdout).toBe("");
    });
  });

  // Seven processes that each load the keys CLI under tsx: a minute or more on a busy 2-core machine.
  test("each keys subcommand explains itself, and a missing subcommand or option is a usage error", async () => {
    const subs = ["create", "revoke", "list", "reencrypt-secrets", "dashboard-link"];
    const runs = await Promise.all(subs.map((sub) => run(npm, ["run", "-s", "keys", "--", sub, "--help"])));
    for (const [i, sub] of subs.entries()) {
      const res = runs[i];
      expect([sub, res.code]).toEqual([sub, 0]);
      expect(res.stdout).toMatch(new RegExp(`^Usage: npm run -s keys -- ${sub} `));
      expect(res.stdout).toMatch(/\nExamples?:\n/);
    }
    expect((await run(npm, ["run", "-s", "keys"])).code).toBe(2);
    const missing = await run(npm, ["run", "-s", "keys", "--", "create", "--json"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--account");
  }, 180_000);
});
