import { isMissingPartition, payloadPurgeAt } from "./retention.js";

describe("payloadPurgeAt", () => {
  it("is the end of the event's UTC day plus the retention days", () => {
    expect(payloadPurgeAt(new Date("2026-11-23T00:00:00Z"), 90).toISOString()).toBe("2027-02-22T00:00:00.000Z");
    expect(payloadPurgeAt(new Date("2026-11-23T23:59:59.999Z"), 90).toISOString()).toBe("2027-02-22T00:00:00.000Z");
    expect(payloadPurgeAt(new Date("2026-11-23T10:00:00Z"), 1).toISOString()).toBe("2026-11-25T00:00:00.000Z");
  });
});

describe("isMissingPartition", () => {
  // The fields of node-postgres's DatabaseError for each (as PostgreSQL 15 sends them).
  const error = (fields: Record<string, unknown>) => Object.assign(new Error("whatever PostgreSQL says"), { code: "23514", ...fields });

  it("is a row of event_payloads that found no partition", () => {
    expect(isMissingPartition(error({ table: "event_payloads", schema: "public", routine: "ExecFindPartition" }))).toBe(true);
  });

  it("is not a CHECK constraint's violation, nor another table's", () => {
    const checkViolation = error({ table: "event_payloads_20261123", constraint: "some_check", routine: "ExecConstraints" });
    expect(isMissingPartition(checkViolation)).toBe(false);
    expect(isMissingPartition(error({ table: "event_payloads", constraint: "some_check" }))).toBe(false);
    expect(isMissingPartition(error({ table: "other_partitioned" }))).toBe(false);
    expect(isMissingPartition(Object.assign(new Error("x"), { code: "23505", table: "event_payloads" }))).toBe(false);
    expect(isMissingPartition(undefined)).toBe(false);
  });
});
