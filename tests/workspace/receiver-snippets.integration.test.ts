import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { format } from "node:util";
import getPort from "get-port";
import { findOnPath, runProcess, startProcess, type StartedProcess } from "@mailhooks/processes";
import { testCertDir } from "../support/env.js";
import { waitUntil } from "../support/wait.js";
import { bodyOf, loadVectors, VECTORS_PATH, type TestVector } from "../../packages/verify/scripts/vectors.js";

/**
 * The examples of docs/receivers.md, "Verifying a signature" (Node, Python, Go) are run as they
 * stand, copied out of the page, against every vector of packages/verify/test-vectors.json: each
 * reaches the vector's outcome (the envelope with the vector's X-Service-Event-Id, or the error
 * code). The Go one runs only where `go` is on the PATH (Go is not part of this repository's
 * toolchain); elsewhere its test is skipped. The typed client of docs/api.md runs in a new
 * project against a running API (readme-client.integration.test.ts), the README's quick start
 * as a whole in readme-quickstart.integration.test.ts.
 */

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const vectorsPath = fileURLToPath(VECTORS_PATH);

const vectors = loadVectors();

/** The vector's X-Service-Event-Id, whatever the case of its name. */
const eventIdOf = (vector: TestVector) => Object.entries(vector.headers).find(([name]) => name.toLowerCase() === "x-service-event-id")?.[1];

/** The outcome a snippet that returns the event id with the envelope reaches. */
const expectedWithId = (vector: TestVector) => (vector.expected.ok ? { ...vector.expected, id: eventIdOf(vector) } : vector.expected);

/** The section's fenced blocks of `language`, in order. */
function pageBlocks(language: string): string[] {
  const page = readFileSync(path.join(root, "docs/receivers.md"), "utf8");
  const start = page.indexOf("\n## Verifying a signature\n");
  const end = page.indexOf("\n## ", start + 1);
  expect(start).toBeGreaterThan(0);
  const section = page.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(new RegExp("^```" + language + "\\n([\\s\\S]*?)^```$", "gm"))].map((m) => m[1]);
}

function onlyBlock(language: string): string {
  const blocks = pageBlocks(language);
  expect(blocks).toHaveLength(1);
  return blocks[0];
}

/** `{name, outcome}` JSON lines, as printed by the runners below, by name. */
function outcomesOf(stdout: string): Map<string, unknown> {
  return new Map(
    stdout
      .trim()
      .split("\n")
      .map((line) => {
        const { name, outcome } = JSON.parse(line) as { name: string; outcome: unknown };
        return [name, outcome] as const;
      }),
  );
}

function expectEveryOutcome(outcomes: Map<string, unknown>): void {
  expect(outcomes.size).toBe(vectors.length);
  for (const vector of vectors)
    expect({ name: vector.name, outcome: outcomes.get(vector.name) }).toEqual({ name: vector.name, outcome: expectedWithId(vector) });
}

// Inside the repository, so that the Node example finds express and @mailhooks/verify.
const work = path.join(root, ".tmp", "receiver-snippets", randomUUID());
beforeAll(() => mkdirSync(work, { recursive: true }));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("docs/receivers.md, Verifying a signature", () => {
  test("the Python example reaches every test vector's outcome", async () => {
    const dir = path.join(work, "python");
    mkdirSync(dir);
    writeFileSync(path.join(dir, "readme_verify.py"), onlyBlock("python"));
    writeFileSync(
      path.join(dir, "run_vectors.py"),
      [
        "import base64, json, sys",
        "from readme_verify import verify",
        "for v in json.load(open(sys.argv[1], encoding='utf-8'))['vectors']:",
        "    try:",
        "        event_id, envelope = verify(v['secrets'], v['headers'], base64.b64decode(v['body_base64']), tolerance_seconds=v['tolerance_seconds'], now=v['now'])",
        "        outcome = {'ok': True, 'envelope': envelope, 'id': event_id}",
        "    except ValueError as error:",
        "        outcome = {'ok': False, 'error': str(error)}",
        "    print(json.dumps({'name': v['name'], 'outcome': outcome}, ensure_ascii=False))",
        "",
      ].join("\n"),
    );
    const { stdout } = await runProcess("python3", [path.join(dir, "run_vectors.py"), vectorsPath], { cwd: dir, check: true });
    expectEveryOutcome(outcomesOf(stdout));
  });

  /**
   * The Node example is a whole program: it runs under tsx as a user would start it
   * (WEBHOOK_SECRET, TLS_CERT_FILE, TLS_KEY_FILE, PORT), once per set of secrets of the vectors,
   * with its clock set to the vectors' `now`, and gets each vector's request over HTTPS. A
   * vector that passes is answered 204, and logged (`id event messageId`) the first time its
   * event id comes; one that fails is answered 401 with its code.
   */
  test("the Node (Express) example reaches the outcome of every test vector of the default tolerance", async () => {
    const dir = path.join(work, "node");
    mkdirSync(dir);
    writeFileSync(path.join(dir, "package.json"), '{ "type": "module", "private": true }\n');
    const program = path.join(dir, "receiver.ts");
    writeFileSync(program, onlyBlock("ts"));
    const clock = path.join(dir, "fixed-clock.mjs");
    writeFileSync(clock, "const fixed = Number(process.env.FIXED_NOW_MS);\nDate.now = () => fixed;\n");

    // The example keeps the default tolerance (300 s): the vectors of another tolerance are not
    // its case (packages/verify's own tests run them).
    const runnable = vectors.filter((v) => v.tolerance_seconds === 300);
    expect(vectors.length - runnable.length).toBeLessThan(3);
    const groups = new Map<string, TestVector[]>();
    for (const vector of runnable) {
      const key = JSON.stringify([vector.secrets, vector.now]);
      groups.set(key, [...(groups.get(key) ?? []), vector]);
    }

    const outcomes = new Map<string, unknown>();
    await Promise.all(
      [...groups.values()].map(async (group) => {
        const port = await getPort();
        // One process (tsx as a loader, not its CLI, which would start another), killed at the end.
        const loaders = ["--import", pathToFileURL(require.resolve("tsx")).href, "--import", pathToFileURL(clock).href];
        const child = startProcess("the Node example", process.execPath, ["--conditions=source", ...loaders, program], {
          cwd: dir,
          env: {
            NODE_OPTIONS: "",
            FIXED_NOW_MS: String(group[0].now * 1000),
            WEBHOOK_SECRET: group[0].secrets.join(","),
            TLS_CERT_FILE: path.join(testCertDir(), "localhost.crt"),
            TLS_KEY_FILE: path.join(testCertDir(), "localhost.key"),
            PORT: String(port),
          },
        });
        try {
          for (const [name, outcome] of await sendVectors(child, port, group)) outcomes.set(name, outcome);
        } finally {
          await child.stop();
        }
      }),
    );
    expect(outcomes.size).toBe(runnable.length);
    for (const group of groups.values()) {
      const seen = new Set<string>();
      for (const vector of group) {
        const id = eventIdOf(vector)!;
        const expected = !vector.expected.ok
          ? { status: 401, code: vector.expected.error }
          : seen.has(id)
            ? { status: 204 }
            : { status: 204, logged: format(id, vector.expected.envelope.event, vector.expected.envelope.data.messageId ?? "") };
        if (vector.expected.ok) seen.add(id);
        expect({ name: vector.name, outcome: outcomes.get(vector.name) }).toEqual({ name: vector.name, outcome: expected });
      }
    }
  }, 240_000);

  (findOnPath("go") ? test : test.skip)(
    "the Go example reaches every test vector's outcome (needs go on the PATH)",
    async () => {
      const dir = path.join(work, "go");
      mkdirSync(dir);
      writeFileSync(path.join(dir, "go.mod"), "module readmesnippet\n\ngo 1.18\n");
      const source = onlyBlock("go");
      expect(source).toMatch(/^package \w+\n/);
      writeFileSync(path.join(dir, "verify.go"), source.replace(/^package \w+\n/, "package main\n"));
      writeFileSync(path.join(dir, "main.go"), GO_RUNNER);
      const { stdout } = await runProcess("go", ["run", ".", vectorsPath], {
        cwd: dir,
        env: { GOTOOLCHAIN: "local", GOFLAGS: "-mod=mod", GOWORK: "off" },
        timeoutMs: 240_000,
        check: true,
      });
      expectEveryOutcome(outcomesOf(stdout));
    },
    300_000,
  );
});

/**
 * Waits for the example to listen, posts each vector's request over HTTPS (the test certificate
 * is trusted through NODE_EXTRA_CA_CERTS), and collects what it answered and logged.
 */
async function sendVectors(child: StartedProcess, port: number, group: TestVector[]): Promise<Map<string, unknown>> {
  const url = `https://localhost:${port}/webhooks`;
  // tsx compiles the example at start: several at once on a busy machine take a while.
  await waitUntil(
    async () => {
      if (!child.running()) throw new Error(`the example exited with ${(await child.exited).code}: ${child.output()}`);
      return fetch(url, { method: "GET" }).then(
        () => true,
        () => false,
      );
    },
    Boolean,
    120_000,
    100,
  ).catch((error: Error) => {
    throw new Error(`the example did not listen on ${port}: ${error.message}; output: ${child.output()}`);
  });

  const answers = new Map<string, { status: number; logged?: string; code?: string }>();
  // The vectors that passed with an event id not seen before: the ones the example logs.
  const passed: string[] = [];
  const seen = new Set<string>();
  for (const vector of group) {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...vector.headers },
      body: bodyOf(vector),
    });
    const text = await res.text();
    const id = eventIdOf(vector);
    if (res.status === 204 && id !== undefined && !seen.has(id)) {
      seen.add(id);
      passed.push(vector.name);
    }
    answers.set(
      vector.name,
      res.status === 401 ? { status: 401, code: (JSON.parse(text) as { error: { code: string } }).error.code } : { status: res.status },
    );
  }
  // Each request that passed logged one line before its answer; the pipe may still hold the last ones.
  await waitUntil(
    () => child.stdout().split("\n").filter(Boolean).length,
    (n) => n >= passed.length,
    2_000,
    20,
  );
  const lines = child.stdout().split("\n").filter(Boolean);
  expect(lines).toHaveLength(passed.length);
  passed.forEach((name, i) => (answers.get(name)!.logged = lines[i]));
  return answers;
}

/** Runs the page's Verify on every vector and prints `{name, outcome}` lines. */
const GO_RUNNER = `package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

type vector struct {
	Name             string            \`json:"name"\`
	Secrets          []string          \`json:"secrets"\`
	Headers          map[string]string \`json:"headers"\`
	BodyBase64       string            \`json:"body_base64"\`
	Now              int64             \`json:"now"\`
	ToleranceSeconds int64             \`json:"tolerance_seconds"\`
}

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var file struct {
		Vectors []vector \`json:"vectors"\`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		panic(err)
	}
	for _, v := range file.Vectors {
		header := http.Header{}
		for name, value := range v.Headers {
			header.Add(name, value)
		}
		body, err := base64.StdEncoding.DecodeString(v.BodyBase64)
		if err != nil {
			panic(err)
		}
		envelope, err := Verify(v.Secrets, header, body, time.Duration(v.ToleranceSeconds)*time.Second, time.Unix(v.Now, 0))
		outcome := map[string]any{"ok": err == nil}
		if err != nil {
			outcome["error"] = err.Error()
		} else {
			outcome["envelope"] = envelope
			outcome["id"] = envelope.ID
		}
		line, err := json.Marshal(map[string]any{"name": v.Name, "outcome": outcome})
		if err != nil {
			panic(err)
		}
		fmt.Println(string(line))
	}
}
`;
