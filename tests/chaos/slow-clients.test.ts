import net from "node:net";
import { randomUUID } from "node:crypto";
import { createApiKey } from "@mailhooks/access";
import { createPrismaClient, type PrismaClient } from "@mailhooks/db";
import { testDatabaseUrl } from "../support/env.js";
import { freePort, killAll, startApiProcess, waitForOutput, type ServiceProcess } from "./support/processes.js";

/**
 * Issue 17 ("Bounded by construction"), item 14, against the real API process (main.ts): Node's
 * limits on slow clients are set (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS,
 * HTTP_KEEP_ALIVE_TIMEOUT_MS, shortened here through the environment), and what Node's HTTP parser
 * refuses (a request line that is not HTTP, headers over 16 KiB, a request that timed out) is
 * answered in the error shape `{"error":{"code","message"}}` with `Connection: close`, where Node
 * sent a status line and no body at all.
 */
const HEADERS_TIMEOUT_MS = 800;
const REQUEST_TIMEOUT_MS = 2_000;
const KEEP_ALIVE_TIMEOUT_MS = 500;
/** Node checks connections against its timeouts every second (http/server.ts). */
const SLACK_MS = 2_500;

describe("slow and malformed clients at the HTTP layer", () => {
  let api: ServiceProcess;
  let port: number;
  let prisma: PrismaClient;
  let apiKey: string;

  beforeAll(async () => {
    port = await freePort();
    prisma = createPrismaClient(testDatabaseUrl(), 1);
    apiKey = (await createApiKey(prisma, `slow-${randomUUID()}`)).key;
    api = startApiProcess("api", {
      PORT: String(port),
      QUEUE_PREFIX: `test-${randomUUID()}`,
      LOG_LEVEL: "info",
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      // The body's own idle limit out of the way: the request timeout is what is tested here.
      HTTP_BODY_IDLE_TIMEOUT_MS: "60000",
      HTTP_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
    });
    await waitForOutput(api, "api listening");
  });
  afterAll(async () => {
    await killAll();
    await prisma?.$disconnect();
  });

  /** Opens a connection, runs `talk` on it and resolves with everything the server sent until it closed, and when. */
  const exchange = (talk: (socket: net.Socket) => void) =>
    new Promise<{ text: string; ms: number }>((resolve, reject) => {
      const started = Date.now();
      const socket = net.connect(port, "127.0.0.1", () => talk(socket));
      let text = "";
      socket.on("data", (chunk) => (text += chunk.toString("latin1")));
      socket.on("close", () => resolve({ text, ms: Date.now() - started }));
      socket.on("error", reject);
    });

  const parse = (text: string) => {
    const [head, body] = [text.slice(0, text.indexOf("\r\n\r\n")), text.slice(text.indexOf("\r\n\r\n") + 4)];
    return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]), head: head.toLowerCase(), body: JSON.parse(body) };
  };

  test("a request line that is not HTTP: 400 in the error shape", async () => {
    const { text } = await exchange((s) => s.write("HELLO THERE\r\n\r\n"));
    const answer = parse(text);
    expect(answer.status).toBe(400);
    expect(answer.head).toContain("connection: close");
    expect(answer.body).toEqual({ error: { code: "invalid_json", message: expect.any(String) } });
  });

  test("headers over Node's 16 KiB: 431 in the error shape", async () => {
    const { text } = await exchange((s) => s.write(`GET /v1/events HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`));
    const answer = parse(text);
    expect(answer.status).toBe(431);
    expect(answer.body).toEqual({ error: { code: "headers_too_large", message: expect.any(String) } });
  });

  test("headers that never end: 408 in the error shape within HTTP_HEADERS_TIMEOUT_MS", async () => {
    const { text, ms } = await exchange((s) => s.write("GET /v1/events HTTP/1.1\r\nHost: x\r\n"));
    const answer = parse(text);
    expect(answer.status).toBe(408);
    expect(answer.body).toEqual({ error: { code: "request_timeout", message: expect.any(String) } });
    expect(ms).toBeLessThan(HEADERS_TIMEOUT_MS + SLACK_MS);
  });

  test("a body that trickles for ever: 408 in the error shape within HTTP_REQUEST_TIMEOUT_MS", async () => {
    let timer: NodeJS.Timeout | undefined;
    const { text, ms } = await exchange((s) => {
      s.write(
        `POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":"`,
      );
      // A byte every 200 ms: never idle, never done.
      timer = setInterval(() => s.writable && s.write("x"), 200);
      s.on("close", () => clearInterval(timer));
    });
    clearInterval(timer);
    const answer = parse(text);
    expect(answer.status).toBe(408);
    expect(answer.body.error.code).toBe("request_timeout");
    expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS + SLACK_MS);
  });

  test("an idle kept-alive connection is closed after HTTP_KEEP_ALIVE_TIMEOUT_MS", async () => {
    const { text, ms } = await exchange((s) => s.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(ms).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + SLACK_MS);
  });
});
