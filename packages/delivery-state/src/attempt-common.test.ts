import { signingSecretAt, signingSecretsAt, type StoredSecrets } from "./attempt-common.js";

/** Which stored secrets sign at a moment, under each scheme (docs/receivers/standard-webhooks.md). */
describe("the secrets that sign", () => {
  const activatesAt = new Date("2026-11-22T10:00:00Z");
  const before = new Date(activatesAt.getTime() - 1);
  const rotated: StoredSecrets = { secret: "new", previous: "old", activatesAt };

  test("without a rotation: the one secret, under both schemes", () => {
    const single: StoredSecrets = { secret: "only", previous: null, activatesAt: null };
    expect([signingSecretAt(single, before), signingSecretsAt(single, before)]).toEqual(["only", ["only"]]);
  });

  test("during the grace: the previous one under service; both, previous first, under standard", () => {
    expect(signingSecretAt(rotated, before)).toBe("old");
    expect(signingSecretsAt(rotated, before)).toEqual(["old", "new"]);
  });

  test("from activates_at on: the new one only, under both schemes", () => {
    for (const at of [activatesAt, new Date(activatesAt.getTime() + 1)]) {
      expect([signingSecretAt(rotated, at), signingSecretsAt(rotated, at)]).toEqual(["new", ["new"]]);
    }
  });
});
