import type { Request, Response } from "express";
import { basicAuth } from "./admin.js";
import { createFailureLimiter } from "./failure-limiter.js";

/**
 * The operators' basic auth counts failed sign-ins per client as the public API does: an IPv6
 * host, which is commonly given a whole /64, cannot get a fresh allowance by changing address.
 * (The admin listener is loopback by default, where every connection is ::1 or 127.0.0.1, so the
 * middleware is called here with the addresses a real listener on a public interface would see.)
 */
describe("basicAuth on the admin listener", () => {
  const LIMIT = 3;

  /** Calls the middleware as a request from `address` with wrong credentials; its status. */
  async function attempt(
    handler: ReturnType<typeof basicAuth>,
    address: string,
    authorization = `Basic ${Buffer.from("ops:wrong").toString("base64")}`,
  ): Promise<number> {
    let status = 0;
    const res = {
      setHeader: () => res,
      status: (code: number) => {
        status = code;
        return res;
      },
      json: () => res,
    };
    let passed = false;
    await handler(
      { ip: address, headers: { authorization }, socket: {} } as unknown as Request,
      res as unknown as Response,
      () => (passed = true),
    );
    return passed ? 200 : status;
  }

  it("refuses a /64 past its failed sign-ins, whichever of its addresses the next one comes from", async () => {
    const handler = basicAuth("ops", "right", createFailureLimiter({ keyPrefix: "admin-test", limit: LIMIT, windowMs: 60_000 }));
    for (let i = 1; i <= LIMIT; i++) expect(await attempt(handler, `2001:db8:1:2::${i}`)).toBe(401);
    expect(await attempt(handler, "2001:db8:1:2:ffff:ffff:ffff:fffe")).toBe(429);
    // Even with the right credentials: they are not looked at while the /64 waits.
    expect(await attempt(handler, "2001:db8:1:2::99", `Basic ${Buffer.from("ops:right").toString("base64")}`)).toBe(429);
    // Another /64, and an IPv4 client, have their own allowance.
    expect(await attempt(handler, "2001:db8:1:3::1")).toBe(401);
    expect(await attempt(handler, "198.51.100.7", `Basic ${Buffer.from("ops:right").toString("base64")}`)).toBe(200);
  });
});
