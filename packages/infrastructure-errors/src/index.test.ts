import { isInfrastructureError } from "./index.js";

describe("isInfrastructureError (503 unavailable)", () => {
  test.each([
    ["a refused connection", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })],
    ["a raw query on a closed connection", new Error("Invalid `prisma.$queryRaw()` invocation:\n\nRaw query failed. Code: `N/A`. Message: `Server has closed the connection.`")],
    ["a model query while the server is away", Object.assign(new Error("Can't reach database server"), { code: "P1001" })],
    ["Redis away", new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    ["a statement timeout through Prisma", new Error("Raw query failed. Code: `57014`. Message: `canceling statement due to statement timeout`")],
    ["Redis frozen (ioredis's commandTimeout)", new Error("Command timed out")],
    ["a cause chain", Object.assign(new Error("wrapped"), { cause: Object.assign(new Error("x"), { code: "ECONNRESET" }) })],
  ])("%s", (_name, error) => {
    expect(isInfrastructureError(error)).toBe(true);
  });

  test("a programming error is not one", () => {
    expect(isInfrastructureError(new TypeError("cannot read properties of undefined"))).toBe(false);
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
