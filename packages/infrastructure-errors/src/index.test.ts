import { isInfrastructureError, markInfrastructureError } from "./index.js";

/** What Prisma 7 with @prisma/adapter-pg raises (as observed): a generic code, the adapter's cause in `meta`. */
const prismaAdapterError = (cause: Record<string, unknown>, code = "P2010") =>
  Object.assign(new Error("\nInvalid `prisma.$queryRaw()` invocation:\n\n\nRaw query failed."), {
    code,
    meta: { driverAdapterError: { name: "DriverAdapterError", cause } },
  });

describe("isInfrastructureError (503 unavailable)", () => {
  test.each([
    ["a refused connection", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })],
    ["a raw query on a closed connection", prismaAdapterError({ kind: "ConnectionClosed" })],
    ["a raw query while the server is away", prismaAdapterError({ kind: "DatabaseNotReachable", host: "127.0.0.1", port: 5432 })],
    ["a model query while the server is away", Object.assign(new Error("Can't reach database server"), { code: "P1001" })],
    // As @mailhooks/queue's connections deliver them (marked).
    ["Redis away (ioredis)", markInfrastructureError(new Error("Stream isn't writeable and enableOfflineQueue options is false"))],
    [
      "a statement timeout through Prisma",
      prismaAdapterError({ kind: "postgres", code: "57014", originalCode: "57014", severity: "ERROR" }),
    ],
    ["Redis frozen (ioredis's commandTimeout)", markInfrastructureError(new Error("Command timed out"))],
    [
      "a command that used up its retries (ioredis)",
      Object.assign(new Error("Reached the max retries per request limit (which is 1)."), { name: "MaxRetriesPerRequestError" }),
    ],
    // As @mailhooks/db's pool delivers them (marked).
    [
      "a connection attempt that timed out (pg)",
      markInfrastructureError(new Error("Connection terminated due to connection timeout", { cause: new Error("lost") })),
    ],
    ["a full pool (pg-pool)", markInfrastructureError(new Error("timeout exceeded when trying to connect"))],
    [
      "a mark in the cause chain",
      new Error("wrapped", { cause: markInfrastructureError(new Error("Connection terminated unexpectedly")) }),
    ],
    ["BullMQ's connection closed", Object.assign(new Error("Connection is closed."), { name: "ConnectionClosedError" })],
    ["a cause chain", Object.assign(new Error("wrapped"), { cause: Object.assign(new Error("x"), { code: "ECONNRESET" }) })],
  ])("%s", (_name, error) => {
    expect(isInfrastructureError(error)).toBe(true);
  });

  test("a programming error is not one", () => {
    expect(isInfrastructureError(new TypeError("cannot read properties of undefined"))).toBe(false);
  });

  test("a message that only quotes a library's words is not one", () => {
    expect(isInfrastructureError(new Error("the receiver said: Connection terminated"))).toBe(false);
    expect(isInfrastructureError(Object.assign(new Error("Command timed out"), { code: "ERR_SOMETHING_ELSE" }))).toBe(false);
  });

  test("nor are a library's exact words without the mark of the client that raised them", () => {
    for (const message of [
      "Connection terminated unexpectedly",
      "timeout exceeded when trying to connect",
      "Command timed out",
      "Connection is closed.",
    ]) {
      expect(isInfrastructureError(new Error(message))).toBe(false);
    }
  });

  test("a constraint through Prisma is not one", () => {
    expect(isInfrastructureError(prismaAdapterError({ kind: "UniqueConstraintViolation", constraint: { fields: ["id"] } }, "P2002"))).toBe(
      false,
    );
  });
});

describe("markInfrastructureError", () => {
  test("returns the same error, its message, class and keys unchanged", () => {
    const error = new RangeError("Connection terminated unexpectedly");
    expect(markInfrastructureError(error)).toBe(error);
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe("Connection terminated unexpectedly");
    expect(Object.keys(error)).toEqual([]);
    expect(JSON.stringify({ error: { ...error } })).toBe('{"error":{}}');
  });

  test("leaves what is not an object, or cannot be marked, as it is", () => {
    expect(markInfrastructureError(undefined)).toBeUndefined();
    expect(markInfrastructureError("text")).toBe("text");
    const frozen = Object.freeze(new Error("frozen"));
    expect(markInfrastructureError(frozen)).toBe(frozen);
    expect(isInfrastructureError(frozen)).toBe(false);
  });
});

describe("isInfrastructureError: PostgreSQL's own codes", () => {
  test.each([
    ["admin shutdown", "57P01"],
    ["cannot connect now (starting up)", "57P03"],
    ["connection failure", "08006"],
    ["statement timeout", "57014"],
    ["lock timeout", "55P03"],
  ])("%s", (_name, code) => {
    expect(isInfrastructureError(Object.assign(new Error("server said no"), { code }))).toBe(true);
  });

  test("a unique violation or a raised exception is not one", () => {
    expect(isInfrastructureError(Object.assign(new Error("duplicate key value"), { code: "23505" }))).toBe(false);
    expect(isInfrastructureError(Object.assign(new Error("injected failure"), { code: "P0001" }))).toBe(false);
  });
});
