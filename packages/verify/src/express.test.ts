import express, { type ErrorRequestHandler, type Request } from "express";
import request from "supertest";
import { verifyWebhook, type VerifiedRequest } from "./express.js";
import { ENVELOPE, SECRET, signedRequest, STANDARD_SECRET, standardSignedRequest, WEBHOOK, withoutEventId } from "../test/signed.js";

/** An Express 5 app whose webhook route answers with what the middleware put on req. */
function appWith(...before: express.RequestHandler[]) {
  const app = express();
  const handled: unknown[] = [];
  app.post("/webhooks", ...before, (req: Request, res) => {
    const { webhook } = req as VerifiedRequest<Request>;
    handled.push(webhook);
    res.json({ webhook, bodyWasBuffer: Buffer.isBuffer(req.body) });
  });
  const onError: ErrorRequestHandler = (error: Error, _req, res, _next) => {
    res.status(500).json({ name: error.name, message: error.message });
  };
  app.use(onError);
  return { app, handled };
}

describe("@mailhooks/verify/express", () => {
  it("after express.raw(): verifies, puts the event id and the envelope on req.webhook and leaves the raw body", async () => {
    const { app } = appWith(express.raw({ type: "application/json" }), verifyWebhook(SECRET));
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ webhook: WEBHOOK, bodyWasBuffer: true });
  });

  it("without a body parser: reads the raw body itself", async () => {
    const { app } = appWith(verifyWebhook(SECRET));
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(200);
    expect(res.body.webhook).toEqual(WEBHOOK);
  });

  it("answers 401 missing_header to a signed request without X-Service-Event-Id: nothing to de-duplicate on", async () => {
    const { app, handled } = appWith(verifyWebhook(SECRET));
    const { body, headers } = withoutEventId(signedRequest(SECRET, ENVELOPE));
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: "missing_header", message: expect.stringContaining("X-Service-Event-Id") } });
    expect(handled).toEqual([]);
  });

  it("answers 401 with a JSON error and never calls the route on a bad signature", async () => {
    const { app, handled } = appWith(express.raw({ type: "application/json" }), verifyWebhook(SECRET));
    const { body, headers } = signedRequest("whsec_someone_else", ENVELOPE);
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(401);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
    expect(handled).toEqual([]);
  });

  it("answers 401 missing_header, and 401 timestamp_out_of_tolerance for an old request", async () => {
    const { app } = appWith(verifyWebhook(SECRET));
    const { body, headers } = signedRequest(SECRET, ENVELOPE, Math.floor(Date.now() / 1000) - 3600);
    const bare = await request(app).post("/webhooks").set("content-type", "application/json").send(body);
    expect(bare.status).toBe(401);
    expect(bare.body.error.code).toBe("missing_header");
    const old = await request(app).post("/webhooks").set(headers).send(body);
    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe("timestamp_out_of_tolerance");
  });

  it("accepts either secret during a rotation", async () => {
    const { app } = appWith(verifyWebhook(["whsec_old", "whsec_new"]));
    for (const secret of ["whsec_old", "whsec_new"]) {
      const { body, headers } = signedRequest(secret, ENVELOPE);
      expect((await request(app).post("/webhooks").set(headers).send(body)).status).toBe(200);
    }
  });

  it('with { scheme: "standard" }: verifies Standard Webhooks requests (either secret of a rotation), and refuses the service scheme\'s', async () => {
    const other = `whsec_${Buffer.alloc(32, 5).toString("base64")}`;
    for (const held of [STANDARD_SECRET, other]) {
      const { app } = appWith(verifyWebhook(held, { scheme: "standard" }));
      const { body, headers } = standardSignedRequest([STANDARD_SECRET, other], ENVELOPE);
      const res = await request(app).post("/webhooks").set(headers).send(body);
      expect(res.status).toBe(200);
      expect(res.body.webhook).toEqual(WEBHOOK);
    }
    const { app, handled } = appWith(verifyWebhook(STANDARD_SECRET, { scheme: "standard" }));
    const { body, headers } = signedRequest(STANDARD_SECRET, ENVELOPE);
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: "missing_header", message: expect.stringContaining("webhook-") } });
    expect(handled).toEqual([]);
  });

  it("after express.json(): fails loudly (500 through the error handler) saying the raw body is needed", async () => {
    const { app, handled } = appWith(express.json(), verifyWebhook(SECRET));
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ name: "TypeError", message: expect.stringContaining("express.raw") });
    expect(handled).toEqual([]);
  });

  it("answers 413 to a body over maxBodyBytes when it reads the body itself", async () => {
    const { app } = appWith(verifyWebhook(SECRET, { maxBodyBytes: 100 }));
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await request(app).post("/webhooks").set(headers).send(body);
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("payload_too_large");
  });
});
