import express from "express";
import request from "supertest";
import { captureLogs } from "@mailhooks/logger";
import { errorHandler } from "./error-handler.js";

/** What errorHandler logs of a request whose path carries something the client made up. */
describe("errorHandler logs no part of the path the client made up", () => {
  // A dashboard session or sign-in token, an email's words: nothing a secret pattern would catch.
  const token = "q1Zx-_3kLmN0pQrStUvWxYz0123456789abcdefGHIJ";
  const words = "Dear customer, order 4711";

  const appThrowing = (error: Error) => {
    const app = express();
    app.get("/v1/webhooks/:id/secret", () => {
      throw error;
    });
    app.use(errorHandler);
    return app;
  };

  it.each([
    ["an unhandled error (500)", new Error("boom"), 500],
    ["a dependency unavailable (503)", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }), 503],
    ["input the database refused (422)", Object.assign(new Error("invalid byte sequence"), { code: "22021" }), 422],
  ])("%s", async (_name, error, status) => {
    const text = await captureLogs(async () => {
      for (const junk of [token, encodeURIComponent(words)]) {
        expect((await request(appThrowing(error)).get(`/v1/webhooks/${junk}/secret`)).status).toBe(status);
      }
    });
    expect(text).toContain("/v1/webhooks/[redacted]/secret");
    expect(text).not.toContain(token);
    expect(text).not.toContain("4711");
  });
});
