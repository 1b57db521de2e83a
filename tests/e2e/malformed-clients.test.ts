import net from "node:net";
import { sampleData, startStack, type Stack } from "../support/stack.js";

/**
 * Issue 17 ("Bounded by construction"), item 14, in the app: a `__proto__` key anywhere in a JSON
 * body is refused 422 like any unknown key (JSON.parse keeps it as an own key, which the schemas
 * dropped silently), a JSON body that is not valid UTF-8 is refused 400 `invalid_json` (it was
 * stored with U+FFFD in place of the bad bytes), and one declared in another charset 415 (issue 32), `?limit=` takes decimal digits only, and a
 * request body that stalls is answered 408 in the error shape within HTTP_BODY_IDLE_TIMEOUT_MS
 * (Node's own limit was 300 s). The server-level limits (Node's parser, header and request
 * timeouts) are in tests/chaos/slow-clients.test.ts, against the real process.
 */
const BODY_IDLE_TIMEOUT_MS = 600;

describe("malformed and slow request bodies", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { HTTP_BODY_IDLE_TIMEOUT_MS: String(BODY_IDLE_TIMEOUT_MS) }, dispatcher: false });
  });
  afterAll(() => stack?.close());

  test("__proto__ in an event's data, at the top or deeper, is a validation error", async () => {
    const data = sampleData("message.sent");
    const bodies = [
      `{"event_type":"message.sent","data":${JSON.stringify(data).slice(0, -1)},"__proto__":{"x":1}}}`,
      `{"event_type":"message.sent","__proto__":{"x":1},"data":${JSON.stringify(data)}}`,
    ];
    for (const body of bodies) {
      const res = await stack.api("POST", "/v1/events", body);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe("validation_error");
      expect(res.body.error.details.map((d: { path: string }) => d.path).join()).toContain("__proto__");
    }
    const hook = await stack.api(
      "POST",
      "/v1/webhooks",
      `{"url":"https://example.com/h","events":["message.sent"],"__proto__":{"status":"disabled"}}`,
    );
    expect(hook.status).toBe(422);
    expect(hook.body.error.code).toBe("validation_error");
  });

  test("invalid UTF-8 inside a JSON body is 400 invalid_json, nothing stored", async () => {
    const json = Buffer.from(JSON.stringify({ event_type: "message.sent", data: sampleData("message.sent", { subject: "XX" }) }));
    const at = json.indexOf("XX");
    json[at] = 0xc3; // a lead byte followed by an ASCII byte: not UTF-8
    json[at + 1] = 0x28;
    const before = (await stack.api("GET", "/v1/events?limit=100")).body.data.length;
    const res = await stack.api("POST", "/v1/events", json);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_json");
    expect((await stack.api("GET", "/v1/events?limit=100")).body.data.length).toBe(before);
  });

  test("a JSON body declared in any charset but UTF-8 is 415 unsupported_media_type, nothing stored (issue 32 item 3)", async () => {
    // The byte 0xff is no UTF-8: under charset=utf-7 it was decoded to U+FFFD and stored, 201.
    const json = Buffer.from(JSON.stringify({ event_type: "message.sent", data: sampleData("message.sent", { subject: "X" }) }));
    json[json.indexOf('"X"') + 1] = 0xff;
    const before = (await stack.api("GET", "/v1/events?limit=100")).body.data.length;
    for (const charset of ["utf-7", "UTF-16", "utf-32", "iso-8859-1", "latin1", '"utf-7"', "bogus"]) {
      const res = await stack.api("POST", "/v1/events", json, { "content-type": `application/json; charset=${charset}` });
      expect([charset, res.status, res.body.error?.code]).toEqual([charset, 415, "unsupported_media_type"]);
    }
    const hook = await stack.api("POST", "/v1/webhooks", JSON.stringify({ url: "https://example.com/h", events: ["message.sent"] }), {
      "content-type": "application/json; charset=utf-16le",
    });
    expect(hook.status).toBe(415);
    expect((await stack.api("GET", "/v1/events?limit=100")).body.data.length).toBe(before);
    // UTF-8 however it is spelled is still JSON; the bad byte is then 400.
    for (const charset of ["utf-8", "UTF-8", '"utf-8"']) {
      const res = await stack.api("POST", "/v1/events", json, { "content-type": `application/json; charset=${charset}` });
      expect([charset, res.status]).toEqual([charset, 400]);
    }
    const valid = JSON.stringify({ event_type: "message.sent", data: sampleData("message.sent") });
    expect((await stack.api("POST", "/v1/events", valid, { "content-type": 'application/json; charset="UTF-8"' })).status).toBe(201);
  });

  test.each(["0x10", "1e2", "+5", " 5", "5.0", "0b11", "Infinity"])("?limit=%s is 422", async (limit) => {
    const res = await stack.api("GET", `/v1/events?limit=${encodeURIComponent(limit)}`);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("validation_error");
  });

  test("?limit=007 and ?limit=100 are decimal: 200", async () => {
    for (const limit of ["007", "100"]) expect((await stack.api("GET", `/v1/events?limit=${limit}`)).status).toBe(200);
  });

  test("a body that stops sending is answered 408 request_timeout in the error shape, and the connection closed", async () => {
    const { port } = new URL(stack.baseUrl);
    const socket = net.connect(Number(port), "127.0.0.1");
    const started = Date.now();
    const answer = new Promise<string>((resolve, reject) => {
      let text = "";
      socket.on("data", (chunk) => (text += chunk.toString()));
      socket.on("close", () => resolve(text));
      socket.on("error", reject);
    });
    socket.write(
      `POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${stack.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"event_type":`,
    );
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toEqual({
      error: { code: "request_timeout", message: expect.any(String) },
    });
    // Closed by the server within the idle limit (plus scheduling), not Node's 300 s.
    expect(Date.now() - started).toBeLessThan(BODY_IDLE_TIMEOUT_MS + 5_000);
  });
});
