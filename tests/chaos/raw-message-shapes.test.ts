import http from "node:http";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { ENVELOPE_MAX_BYTES, envelopeByteLength } from "@mailhooks/events";
import { parseRawMessage } from "../../apps/api/src/inbound/parse-message.js";
import { createHook, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { startStack, type Stack } from "../support/stack.js";
import {
  buildWorkspace,
  endChaosFile,
  freePort,
  ROOT,
  serviceEnv,
  startService,
  waitForOutput,
  type ServiceProcess,
} from "./support/processes.js";

/**
 * Issue 32: one raw message must never take the API down. The API runs as production runs it
 * (its build, with the Node flags of package.json's `start:api`: a 192 MB heap). Every shape that
 * grows in JSON (control bytes six-fold, `"` and `\` two-fold, lone surrogates, characters outside
 * the BMP, long header folds) is posted with an envelope just under and just over the 10 MiB
 * limit, one at a time and five at once: each is answered 201 or 413 (503 with Retry-After when
 * the process's byte budget is full), the API lives on, and every accepted one is delivered.
 * Messages that cost mailparser far more than their size (short lines, folded or comma-separated
 * headers, thousands of report blocks) are refused with 413 before they are parsed.
 */
const MIB = 1024 * 1024;
/** How far from the limit "just under" and "just over" are, in bytes of envelope. */
const MARGIN = 64;

/** The Node flags of `npm run start:api`, read from package.json so that the test keeps in step. */
async function startApiFlags(): Promise<string[]> {
  const scripts = (JSON.parse(await readFile(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  const flags = scripts["start:api"].split(/\s+/).filter((word) => word.startsWith("--max-"));
  if (flags.length === 0) throw new Error(`no heap flags in start:api: ${scripts["start:api"]}`);
  return flags;
}

/**
 * A shape: the message's head (with `id` in its Message-ID) and the body made of `count` units,
 * whose envelope grows by `jsonBytes` per unit.
 */
interface Shape {
  name: string;
  head: (id: string) => string;
  unit: Buffer;
  jsonBytes: number;
}

const headLines = (id: string, extra: string[] = [], subject = "shapes") =>
  [
    "From: Alice <alice@example.com>",
    "To: bob@example.org",
    `Subject: ${subject}`,
    `Message-ID: <${id}@example.com>`,
    ...extra,
    "Content-Type: text/plain; charset=utf-8",
    "Content-Transfer-Encoding: 8bit",
    "",
    "",
  ].join("\r\n");

/** 900 lone surrogates in an encoded-word Subject (UTF-16LE keeps them): each takes six bytes, `\ud800`. */
function loneSurrogateSubject(): string {
  const units = Buffer.alloc(900 * 2);
  for (let i = 0; i < 900; i++) units.writeUInt16LE(0xd800 + i, i * 2);
  return `=?utf-16le?B?${units.toString("base64")}?=`;
}
/** A References header folded before each of 2,000 ids, and a 60 KiB header folded every few bytes. */
const folds = [
  `References: ${Array.from({ length: 2000 }, (_, i) => `<r${i}@example.com>`).join("\r\n ")}`,
  `X-Folded: ${Array.from({ length: 15_000 }, () => "a").join("\r\n ")}`,
];

const SHAPES: Shape[] = [
  { name: "control bytes", head: (id) => headLines(id), unit: Buffer.from([0x01]), jsonBytes: 6 },
  { name: "quotes", head: (id) => headLines(id), unit: Buffer.from('"'), jsonBytes: 2 },
  { name: "backslashes", head: (id) => headLines(id), unit: Buffer.from("\\"), jsonBytes: 2 },
  { name: "lone surrogates", head: (id) => headLines(id, [], loneSurrogateSubject()), unit: Buffer.from("\x02"), jsonBytes: 6 },
  { name: "non-BMP characters", head: (id) => headLines(id), unit: Buffer.from("😀"), jsonBytes: 4 },
  { name: "long header folds", head: (id) => headLines(id, folds), unit: Buffer.from('\\"'), jsonBytes: 4 },
];

/**
 * A message of `shape` whose envelope takes `target` bytes: its size with no body is measured
 * (the envelope grows by `jsonBytes` a unit from there).
 */
async function messageOf(shape: Shape, id: string, target: number): Promise<Buffer> {
  const now = new Date();
  const head = Buffer.from(shape.head(id), "latin1");
  const parsed = await parseRawMessage(head, "inbox", now);
  const base = envelopeByteLength(parsed.eventType, now, { ...parsed.data, threadId: "thr_000000000000000000000000" });
  const count = Math.floor((target - base) / shape.jsonBytes);
  return Buffer.concat([head, Buffer.alloc(count * shape.unit.length, shape.unit)]);
}

describe("every shape that grows in JSON, at the envelope limit, against the API's heap limit", () => {
  let stack: Stack;
  let api: ServiceProcess;
  let baseUrl: string;
  let hooks: HookReceiver;
  /** Event ids answered 201, with the inbox they went to. */
  const accepted: { eventId: string; inbox: string }[] = [];

  let flags: string[];
  /** Starts the API process (again, when a test before ended it: each test's answers are its own). */
  const startApi = async () => {
    const port = await freePort();
    api = startService(
      "api",
      "apps/api/dist/main.js",
      serviceEnv({ PORT: String(port), QUEUE_PREFIX: stack.prefix, LOG_LEVEL: "info", RATE_LIMIT_PER_MINUTE: "0" }),
      { nodeFlags: flags },
    );
    await waitForOutput(api, "api listening", 60_000);
    baseUrl = `http://127.0.0.1:${port}`;
  };

  beforeAll(async () => {
    stack = await startStack();
    hooks = await startHookReceiver(stack);
    await createHook(stack, hooks, "/shapes", ["message.received"]);
    [flags] = await Promise.all([startApiFlags(), buildWorkspace("apps/api")]);
    await startApi();
  }, 180_000);
  beforeEach(async () => {
    if (!api.running()) await startApi();
  }, 60_000);
  afterAll(() => endChaosFile(stack));

  /** POSTs `message` on a connection of its own (a kept-alive one may be closed by the server while the body is sent). */
  const post = (inbox: string, message: Buffer) =>
    new Promise<{ status: number; retryAfter: string | undefined; body: { event_id?: string; error?: { code: string; message: string } } }>(
      (resolve, reject) => {
        const req = http.request(
          `${baseUrl}/v1/inboxes/${inbox}/messages`,
          {
            method: "POST",
            agent: false,
            headers: { authorization: `Bearer ${stack.apiKey}`, "content-type": "message/rfc822", "content-length": message.length },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (chunk: Buffer) => chunks.push(chunk));
            res.on("end", () =>
              resolve({
                status: res.statusCode!,
                retryAfter: res.headers["retry-after"],
                body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
              }),
            );
            res.on("error", reject);
          },
        );
        req.on("error", reject);
        req.end(message);
      },
    );
  const alive = async () => {
    expect(api.running()).toBe(true);
    expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);
  };
  const storedIn = async (inbox: string) =>
    (
      await stack.pool.query<{ id: string; bytes: number }>(
        "SELECT e.id, octet_length(p.payload) AS bytes FROM events e JOIN event_payloads p ON p.event_id = e.id AND p.created_at = e.created_at WHERE e.account_id = $1 AND e.inbox_id = $2",
        [stack.accountId, inbox],
      )
    ).rows;

  /** Posts each of `messages` at once; checks each answer against `side` and records the accepted ones. */
  async function postAll(messages: { inbox: string; side: "under" | "over"; message: Buffer }[]) {
    const answers = await Promise.all(messages.map(async (m) => ({ ...m, answer: await post(m.inbox, m.message) })));
    if (process.env.CHAOS_LOGS)
      process.stderr.write(`answers: ${JSON.stringify(answers.map((a) => [a.inbox, a.side, a.answer.status]))}\n`);
    for (const { inbox, side, answer } of answers) {
      if (answer.status === 503) {
        expect(Number(answer.retryAfter)).toBeGreaterThan(0);
        continue;
      }
      expect({ inbox, side, status: answer.status, error: answer.body.error }).toEqual({
        inbox,
        side,
        status: side === "under" ? 201 : 413,
        error: side === "under" ? undefined : expect.objectContaining({ code: "payload_too_large" }),
      });
      if (answer.status === 201) accepted.push({ eventId: answer.body.event_id!, inbox });
    }
    await alive();
    return answers;
  }

  test("what costs mailparser far more than its size is 413 before it is parsed, and the API lives", async () => {
    const head = headLines(`costly-${Date.now()}`);
    const costly = [
      // 10 MiB of short lines: its envelope fits, mailparser would need some 300 MB.
      Buffer.from(head + "a\r\n".repeat(Math.floor((9.9 * MIB) / 3)), "latin1"),
      // A 1 MiB address list in a header: some 180 MB.
      Buffer.from(head.replace("To: bob@example.org", `To: ${"a,".repeat(MIB / 2)}`), "latin1"),
      // Folded part headers, ten parts of 0.9 MiB: some 330 MB.
      Buffer.from(
        headLines("parts").replace("text/plain; charset=utf-8", 'multipart/mixed; boundary="b"') +
          `--b\r\nContent-Type: text/plain\r\nX-Long: a${"\r\n a".repeat(Math.floor((0.9 * MIB) / 4))}\r\n\r\nx\r\n`.repeat(10) +
          "--b--\r\n",
        "latin1",
      ),
      // A delivery report of 100,000 tiny blocks (each once parsed by a MailParser of its own).
      Buffer.from(
        `From: mailer@example.com\r\nContent-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\n${"X: y\r\n\r\n".repeat(100_000)}--b--\r\n`,
        "latin1",
      ),
    ];
    for (const message of costly) {
      const answer = await post("inbox_costly", message);
      expect([answer.status, answer.body.error?.code]).toEqual([413, "payload_too_large"]);
      await alive();
    }
    expect(await storedIn("inbox_costly")).toEqual([]);
  }, 120_000);

  test.each(SHAPES.map((shape, i) => [shape.name, i] as const))(
    "%s: just under the limit is 201 and stored whole, just over is 413 and nothing is stored; one at a time",
    async (_name, i) => {
      const shape = SHAPES[i];
      const inbox = `inbox_one_${i}`;
      const under = await messageOf(shape, `under-${i}-${Date.now()}`, ENVELOPE_MAX_BYTES - MARGIN);
      const over = await messageOf(shape, `over-${i}-${Date.now()}`, ENVELOPE_MAX_BYTES + MARGIN);
      const [underAnswer] = await postAll([{ inbox, side: "under", message: under }]);
      // Alone, nothing else holds the budget: no 503.
      expect(underAnswer.answer.status).toBe(201);
      await postAll([{ inbox, side: "over", message: over }]);
      const stored = await storedIn(inbox);
      expect(stored.map((e) => e.id)).toEqual([underAnswer.answer.body.event_id]);
      expect(stored[0].bytes).toBeGreaterThan(ENVELOPE_MAX_BYTES - MARGIN - shape.jsonBytes);
      expect(stored[0].bytes).toBeLessThanOrEqual(ENVELOPE_MAX_BYTES);
    },
    120_000,
  );

  test("five at once, under and then over the limit: 201, 413 or 503 with Retry-After; the API lives", async () => {
    const five = SHAPES.slice(0, 5);
    for (const side of ["under", "over"] as const) {
      const target = side === "under" ? ENVELOPE_MAX_BYTES - MARGIN : ENVELOPE_MAX_BYTES + MARGIN;
      const messages = await Promise.all(
        five.map(async (shape, i) => ({
          inbox: `inbox_five_${side}`,
          side,
          message: await messageOf(shape, `five-${side}-${i}-${Date.now()}`, target),
        })),
      );
      await postAll(messages);
    }
    expect((await storedIn("inbox_five_over")).length).toBe(0);
    // The six shapes and the long header folds at once.
    const all = await Promise.all(
      SHAPES.map(async (shape, i) => ({
        inbox: "inbox_six",
        side: "under" as const,
        message: await messageOf(shape, `six-${i}-${Date.now()}`, ENVELOPE_MAX_BYTES - MARGIN),
      })),
    );
    await postAll(all);
  }, 300_000);

  test("every accepted message is delivered, its envelope whole and signed", async () => {
    expect(accepted.length).toBeGreaterThanOrEqual(SHAPES.length);
    const ids = new Set(accepted.map((a) => a.eventId));
    const arrivals = await hooks.receiver.waitFor(
      (all) => [...ids].every((id) => all.some((a) => a.eventId === id && a.status === 200)),
      120_000,
    );
    for (const id of ids) {
      const arrival = arrivals.find((a) => a.eventId === id && a.status === 200)!;
      expect(arrival.verified).toBe(true);
      expect(Buffer.byteLength(arrival.body)).toBeLessThanOrEqual(ENVELOPE_MAX_BYTES);
      expect(Buffer.byteLength(arrival.body)).toBeGreaterThan(ENVELOPE_MAX_BYTES - MARGIN - 6);
    }
    await alive();
  }, 180_000);
});
