import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { signPayload } from "@mailhooks/signing";
import { waitUntil } from "../../tests/support/wait.js";

// The Python receiver of the docs (stdlib only) reaches the outcome of every test vector, and
// its server accepts what the service signs.
const script = fileURLToPath(new URL("./python_receiver.py", import.meta.url));
const vectorsPath = fileURLToPath(new URL("../../packages/verify/test-vectors.json", import.meta.url));
const vectors = (JSON.parse(readFileSync(vectorsPath, "utf8")) as { vectors: Array<{ name: string; expected: unknown }> }).vectors;

describe("docs/receivers/python_receiver.py", () => {
  it("reaches every test vector's outcome", async () => {
    const { stdout } = await promisify(execFile)("python3", [script, "--vectors", vectorsPath]);
    const outcomes = new Map(
      stdout
        .trim()
        .split("\n")
        .map((line) => {
          const { name, outcome } = JSON.parse(line) as { name: string; outcome: unknown };
          return [name, outcome] as const;
        }),
    );
    expect(outcomes.size).toBe(vectors.length);
    for (const vector of vectors)
      expect({ name: vector.name, outcome: outcomes.get(vector.name) }).toEqual({ name: vector.name, outcome: vector.expected });
  });

  describe("as a server", () => {
    let child: ChildProcess;
    let url: string;
    const lines: string[] = [];

    beforeAll(async () => {
      child = spawn("python3", [script, "--port", "0"], {
        env: { ...process.env, WEBHOOK_SECRET: "whsec_py_old,whsec_py_new" },
        stdio: ["ignore", "pipe", "inherit"],
      });
      const output = createInterface({ input: child.stdout! });
      url = await new Promise((resolve, reject) => {
        child.once("exit", (code) => reject(new Error(`python3 exited with ${code}`)));
        output.on("line", (line) => {
          lines.push(line);
          const listening = /^listening on (\S+)$/.exec(line);
          if (listening) resolve(listening[1]);
        });
      });
    });

    afterAll(() => {
      child.kill();
    });

    const body =
      '{"event":"message.opened","timestamp":1795341600,"data":{"messageId":"<py@example.com>","subject":"Grüße","openCount":1}}';
    const FIRST = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6d001";
    const SECOND = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6d002";
    const post = (secret: string, eventId: string | null = FIRST) => {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers: Record<string, string> = {
        "content-type": "application/json",
        "X-Service-Timestamp": timestamp,
        "X-Service-Signature": signPayload(secret, timestamp, body),
      };
      if (eventId !== null) headers["X-Service-Event-Id"] = eventId;
      return fetch(url, { method: "POST", headers, body });
    };
    const processed = () => lines.filter((l) => l.startsWith("processed"));
    /** The server prints before it answers, but the line may still be in the pipe: wait for it. */
    const settle = async (count: number) => {
      await waitUntil(
        () => processed().length,
        (n) => n >= count,
        2_000,
        20,
      );
    };

    it("answers 204 to a signed event (either secret of a rotation) and processes each X-Service-Event-Id once", async () => {
      expect((await post("whsec_py_new")).status).toBe(204);
      expect((await post("whsec_py_old")).status).toBe(204);
      await settle(1);
      expect((await post("whsec_py_new")).status).toBe(204);
      // A second open of the same message: the same messageId, another event.
      expect((await post("whsec_py_new", SECOND)).status).toBe(204);
      await settle(2);
      expect(processed()).toEqual([
        `processed ${FIRST} message.opened <py@example.com>`,
        `processed ${SECOND} message.opened <py@example.com>`,
      ]);
    });

    it("answers 401 missing_header to a signed request without X-Service-Event-Id", async () => {
      const res = await post("whsec_py_new", null);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: { code: "missing_header", message: expect.stringContaining("X-Service-Event-Id") } });
    });

    it("answers 401 with the error code to a wrong secret", async () => {
      const res = await post("whsec_other");
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
    });
  });
});
