import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { buildEnvelope } from "@mailhooks/events";
import { signPayload } from "@mailhooks/signing";
import type { WebhookEvent } from "@mailhooks/verify";
import { createReceiver } from "./verify-webhook.js";

// The receiver of the README's quick start (docs/receivers.md names it too), listening for real, fed envelopes built and signed by the
// service's own code (@mailhooks/events and @mailhooks/signing), as the dispatcher sends them.
const OLD = "whsec_example_old";
const NEW = "whsec_example_new";
const processed: WebhookEvent[] = [];
let server: Server;
let url: string;

beforeAll(async () => {
  server = createReceiver([OLD, NEW], (webhook) => {
    processed.push(webhook);
  }).listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
});

afterAll(() => new Promise((resolve) => server.close(resolve)));

const body = buildEnvelope("message.sent", new Date("2026-11-22T10:00:00Z"), {
  messageId: "<example-1@example.com>",
  threadId: "thr_1",
  inboxId: "inb_1",
  from: "Zoë <zoe@example.com>",
  to: ["bob@example.com"],
  subject: "Café ☕",
  status: "sent",
});

const EVENT_ID = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6c001";

/** POSTs `payload` as the dispatcher does: X-Service-Timestamp now, signed with `secret`, X-Service-Event-Id `id`. */
function deliver(secret: string, payload = body, timestamp = String(Math.floor(Date.now() / 1000)), id: string | null = EVENT_ID) {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "X-Service-Timestamp": timestamp,
      "X-Service-Signature": signPayload(secret, timestamp, payload),
      ...(id === null ? {} : { "X-Service-Event-Id": id }),
    },
    body: payload,
  });
}

describe("the receiver example (examples/verify-webhook.ts)", () => {
  it("processes a signed event once per event id, however often it is delivered, with either secret of a rotation", async () => {
    expect((await deliver(NEW)).status).toBe(204);
    expect((await deliver(OLD)).status).toBe(204);
    expect(processed).toEqual([{ id: EVENT_ID, ...JSON.parse(body) }]);
  });

  it("processes another event about the same message (same messageId, another event id), and refuses a request without an event id", async () => {
    processed.length = 0;
    const other = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6c002";
    expect((await deliver(NEW, body, undefined, other)).status).toBe(204);
    const unkeyed = await deliver(NEW, body, undefined, null);
    expect(unkeyed.status).toBe(401);
    expect(((await unkeyed.json()) as { error: { code: string } }).error.code).toBe("missing_header");
    expect(processed).toEqual([{ id: other, ...JSON.parse(body) }]);
  });

  it("answers 401 with a JSON error to a wrong secret, a changed body or a stale timestamp, and processes nothing", async () => {
    processed.length = 0;
    const wrong = await deliver("whsec_someone_else");
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });

    const timestamp = String(Math.floor(Date.now() / 1000));
    const changed = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "X-Service-Timestamp": timestamp,
        "X-Service-Signature": signPayload(NEW, timestamp, body),
      },
      body: body.replace("Café", "Cafe"),
    });
    expect(changed.status).toBe(401);

    const stale = await deliver(NEW, body, String(Math.floor(Date.now() / 1000) - 600));
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe("timestamp_out_of_tolerance");
    expect(processed).toEqual([]);
  });
});
