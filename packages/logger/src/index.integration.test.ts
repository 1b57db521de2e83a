import pg from "pg";
import { captureLogs, getLogger, redactPath, scrubErrorText, scrubSecrets } from "./index.js";

const KEY = "whk_0123456789ab_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdefg";
const SECRET = "whsec_Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHF1dXg";

const captured = (fn: () => unknown) => captureLogs(fn);

describe("the logger keeps secrets out", () => {
  test("fields named like secrets are redacted, nested too, in arrays and in errors' texts", async () => {
    const text = await captured(() => {
      getLogger("t").warn("nested", {
        request: {
          headers: { authorization: `Bearer ${KEY}` },
          items: [{ secret: SECRET }],
          webhook: { url: "https://x", password: "p4ss" },
        },
      });
      getLogger("t").error("an error object", { error: new Error(`failed with key ${KEY}`) });
    });
    expect(text).toContain("https://x");
    for (const leaked of [KEY, KEY.slice(17), SECRET, "p4ss"]) expect(text).not.toContain(leaked);
    expect(text).toContain("whk_0123456789ab_[redacted]"); // the public prefix stays, to know which key
  });

  test("secrets in free text (messages, URLs, any string) are scrubbed", () => {
    expect(scrubSecrets(`key=${KEY}&s=${SECRET}, Authorization: Basic dXNlcjpwYXNz`)).toBe(
      "key=whk_0123456789ab_[redacted]&s=whsec_[redacted], Authorization: Basic [redacted]",
    );
    expect(scrubSecrets("v1.0a1b2c3d.aXY.Y2lwaGVy.dGFn stored")).toBe("[redacted ciphertext] stored");
    // A secret in standard base64 (+, / and = padding), whole.
    expect(scrubSecrets("secret whsec_eGZJ6+ss/Zm9vYmFy/eGZJ6Gss= given")).toBe("secret whsec_[redacted] given");
  });

  test("an error text loses the input it quotes: a real PostgreSQL error", async () => {
    const client = new pg.Client({
      connectionString: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test",
    });
    await client.connect();
    const body = "Dear customer, your order 4711 has shipped";
    let error: Error | undefined;
    try {
      await client.query("SELECT $1::int", [body]);
    } catch (e) {
      error = e as Error;
    } finally {
      await client.end();
    }
    expect(error?.message).toContain(body); // PostgreSQL quotes what it refused
    const text = await captured(() => getLogger("t").error("query failed", { error: error!.message, stack: error!.stack }));
    expect(text).toContain("invalid input syntax for type integer");
    expect(text).not.toContain("your order 4711");
    expect(scrubErrorText(`value "${SECRET}" and '${body}'`)).toBe(`value "[redacted]" and '[redacted]'`);
  });

  test("request paths keep only the routes' words and our ids: tokens, keys and secrets in them are redacted", async () => {
    const token = "q1Zx-_3kLmN0pQrStUvWxYz0123456789abcdefGHIJ";
    expect(redactPath(`/dashboard/sign-in/${token}`)).toBe("/dashboard/sign-in/[redacted]");
    expect(redactPath(`/v1/webhooks/wh_0123456789abcdef0123456789abcdef/secret/rotate`)).toBe(
      "/v1/webhooks/wh_0123456789abcdef0123456789abcdef/secret/rotate",
    );
    expect(redactPath(`/v1/webhooks/${encodeURIComponent(SECRET)}/secret?k=${KEY}`)).toBe("/v1/webhooks/[redacted]/secret");
    expect(redactPath(`/v1/inboxes/Dear%20customer/messages`)).toBe("/v1/inboxes/[redacted]/messages");
    expect(redactPath(redactPath(`/dashboard/sign-in/${token}`))).toBe("/dashboard/sign-in/[redacted]");
    // Whoever logs a `path` field gets it redacted.
    const text = await captured(() =>
      getLogger("t").warn("failed", { path: `/dashboard/sign-in/${token}`, nested: { path: `/v1/events/${token}` } }),
    );
    expect(text).not.toContain(token);
    expect(text).toContain("/dashboard/sign-in/[redacted]");
  });
});
