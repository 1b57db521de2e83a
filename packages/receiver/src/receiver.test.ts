import https from "node:https";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { signPayload } from "@mailhooks/signing";
import { ensureLocalCertificate } from "./certs.js";
import { startReceiver, type Receiver } from "./receiver.js";

const SECRET = "whsec_receiver_test";
const BODY = '{"event":"message.sent","timestamp":1795341600,"data":{"messageId":"<m1@example.com>"}}';

let certDir: string;
let ca: string;
let receiver: Receiver;
/** Status the receiver answers to the nth verified request at /hooks/flaky. */
const flakyStatuses = [500, 200, 200];

beforeAll(async () => {
  certDir = await mkdtemp(path.join(os.tmpdir(), "receiver-test-"));
  const { cert, key } = await ensureLocalCertificate(certDir);
  ca = cert;
  receiver = await startReceiver({
    cert,
    key,
    secretFor: (p) => (p.startsWith("/hooks/") ? SECRET : undefined),
    behavior: (arrival, nth) => (arrival.path === "/hooks/flaky" ? { status: flakyStatuses[nth - 1] } : {}),
  });
});

afterAll(async () => {
  await receiver.close();
  await rm(certDir, { recursive: true, force: true });
});

/** POSTs `body` to the receiver, trusting its certificate explicitly; resolves to the status. */
function post(p: string, body: string, signature: string): Promise<number> {
  const timestamp = "1795341600";
  return new Promise((resolve, reject) => {
    const req = https.request(receiver.url(p), {
      method: "POST",
      ca,
      headers: { "content-type": "application/json", "X-Service-Timestamp": timestamp, "X-Service-Signature": signature },
    });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const goodSignature = signPayload(SECRET, "1795341600", BODY);

describe("reference receiver", () => {
  it("accepts a correctly signed body and reads its messageId", async () => {
    expect(await post("/hooks/ok", BODY, goodSignature)).toBe(200);
    expect(receiver.arrivals.at(-1)).toMatchObject({
      path: "/hooks/ok",
      verified: true,
      event: "message.sent",
      messageId: "<m1@example.com>",
    });
  });

  it("answers 401 to a bad signature without parsing the body", async () => {
    expect(await post("/hooks/ok", BODY, signPayload("whsec_other", "1795341600", BODY))).toBe(401);
    const arrival = receiver.arrivals.at(-1)!;
    expect(arrival).toMatchObject({ verified: false, status: 401 });
    expect(arrival.event).toBeUndefined();
  });

  it("answers 400 to a correctly signed body that is not an envelope", async () => {
    const notJson = "not json";
    expect(await post("/hooks/ok", notJson, signPayload(SECRET, "1795341600", notJson))).toBe(400);
    expect(receiver.arrivals.at(-1)).toMatchObject({ verified: true, status: 400, body: notJson });
  });

  it("answers 404 on a path with no secret", async () => {
    expect(await post("/elsewhere", BODY, goodSignature)).toBe(404);
  });

  it("counts a messageId as processed only once it was answered 2xx", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push(await post("/hooks/flaky", BODY, goodSignature));
    expect(statuses).toEqual([500, 200, 200]);
    const flaky = receiver.arrivals.filter((a) => a.path === "/hooks/flaky");
    // The retry after the 500 is the first processing; only the third request is a duplicate.
    expect(flaky.map((a) => a.duplicate)).toEqual([false, false, true]);
  });
});
