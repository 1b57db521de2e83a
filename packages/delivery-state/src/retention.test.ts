import { payloadPurgeAt } from "./retention.js";

describe("payloadPurgeAt", () => {
  it("is the end of the event's UTC day plus the retention days", () => {
    expect(payloadPurgeAt(new Date("2026-11-23T00:00:00Z"), 90).toISOString()).toBe("2027-02-22T00:00:00.000Z");
    expect(payloadPurgeAt(new Date("2026-11-23T23:59:59.999Z"), 90).toISOString()).toBe("2027-02-22T00:00:00.000Z");
    expect(payloadPurgeAt(new Date("2026-11-23T10:00:00Z"), 1).toISOString()).toBe("2026-11-25T00:00:00.000Z");
  });
});
