import { AppError, ERROR_REASONS, type ErrorCode, type ErrorReason } from "../errors.js";
import { refusalInWords } from "./refusal-words.js";

/** refusal-words.ts: a page words a refusal by its reason, never by the API's message. */
describe("refusalInWords", () => {
  const every = (Object.entries(ERROR_REASONS) as [ErrorCode, readonly ErrorReason[]][]).flatMap(([code, reasons]) =>
    reasons.map((reason) => [code, reason] as const),
  );

  test.each(every)("%s / %s has words of its own", (code, reason) => {
    const words = refusalInWords(new AppError(code, reason, "the API's message, naming webhook_id"));
    expect(words.length).toBeGreaterThan(0);
    expect(words).not.toContain("webhook_id");
  });

  test("the replay refusals that share 409 are told apart", () => {
    const words = (["several_destinations", "webhook_not_a_destination", "no_destination", "destinations_disabled"] as const).map(
      (reason) => refusalInWords(new AppError("conflict", reason, "conflict")),
    );
    expect(new Set(words).size).toBe(4);
    expect(words[0]).toBe(
      "This event went to several webhooks: under Webhook, choose the one whose secret signs the replay to the override URL.",
    );
  });

  test("a validation error is worded from its details; a rate limit from its Retry-After", () => {
    expect(
      refusalInWords(
        new AppError("validation_error", "invalid_input", "x", { details: [{ path: "id", message: "must be a webhook id" }] }),
      ),
    ).toBe("Id: must be a webhook id.");
    expect(refusalInWords(new AppError("rate_limited", "account_rate_limit", "x", { headers: { "Retry-After": "12" } }))).toBe(
      "Too many requests for this account: try again in 12 seconds.",
    );
  });
});
