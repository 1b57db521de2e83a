import { randomBytes } from "node:crypto";
import http from "node:http";
import { startStack, type Stack } from "../support/stack.js";

/**
 * Issue 17 ("Bounded by construction"), item 4: GET /metrics needs no key, so what any client
 * sends must not add series to it. The route label is the route's pattern in the code's own
 * letter case (Express matches paths case-insensitively), and every path no route matches shares
 * the label `unmatched`. The method label is one of the methods the API answers, or `other`
 * (issue 32 item 5: Node parses 34 methods, and each made new series).
 */
describe("metrics labels come from route patterns, never from request text", () => {
  let stack: Stack;
  beforeAll(async () => {
    // No limiter in the way: every request below reaches its route (or none).
    stack = await startStack({ env: { RATE_LIMIT_PER_MINUTE: "0", UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "0" }, dispatcher: false });
  });
  afterAll(() => stack?.close());

  /** A random upper/lower-case variant of `text`. */
  const scramble = (text: string) => [...text].map((c) => (Math.random() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join("");

  const series = async () => {
    const text = await (await fetch(`${stack.baseUrl}/metrics`)).text();
    const lines = text.split("\n").filter((line) => /^http_request/.test(line));
    const routes = new Set(lines.map((line) => /route="([^"]*)"/.exec(line)?.[1]).filter((r): r is string => r !== undefined));
    return { count: lines.length, routes };
  };

  test("3,000 case variants and unknown paths add no series beyond the routes' own", async () => {
    const paths = [
      ...Array.from({ length: 1_000 }, () => scramble("/v1/events")),
      ...Array.from({ length: 1_000 }, () => `${scramble("/dashboard/sign-in")}/${randomBytes(8).toString("hex")}`),
      ...Array.from({ length: 500 }, () => `/${randomBytes(6).toString("hex")}/${scramble("webhooks")}`),
      ...Array.from(
        { length: 500 },
        () => `${scramble("/v1/webhooks")}/${randomBytes(6).toString("hex")}/${randomBytes(4).toString("hex")}`,
      ),
    ];
    let next = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < paths.length) {
          const path = paths[next++];
          const res = await fetch(`${stack.baseUrl}${path}`, { headers: { authorization: `Bearer ${stack.apiKey}` } });
          await res.arrayBuffer();
        }
      }),
    );
    const { count, routes } = await series();
    for (const route of routes) expect(route === "unmatched" || /^\/(v1|dashboard)\//.test(route)).toBe(true);
    // The case variants landed on the routes' patterns, in the code's case.
    expect(routes).toContain("/v1/events/");
    expect(routes).toContain("/dashboard/sign-in/:token");
    expect([...routes].filter((route) => route !== route.toLowerCase() && !route.includes(":"))).toEqual([]);
    expect(routes.size).toBeLessThanOrEqual(6);
    // Counter and histogram series of a handful of (method, route, status): nowhere near 3,000.
    expect(count).toBeLessThan(200);
  });

  test("every method Node parses adds at most one series beyond the API's own methods: `other`", async () => {
    const send = (method: string, path: string) =>
      new Promise<void>((resolve) => {
        const req = http.request(
          `${stack.baseUrl}${path}`,
          { method, agent: false, headers: { authorization: `Bearer ${stack.apiKey}` } },
          (res) => {
            res.resume();
            res.on("end", resolve);
          },
        );
        req.on("error", () => resolve());
        req.end();
      });
    // CONNECT is not a request to a route: Node hands it to a `connect` listener, which the API has none of.
    for (const method of http.METHODS.filter((m) => m !== "CONNECT"))
      for (const path of ["/v1/events", "/v1/webhooks/x", "/nowhere"]) await send(method, path);
    const text = await (await fetch(`${stack.baseUrl}/metrics`)).text();
    const methods = new Set([...text.matchAll(/^http_request\w*\{[^}]*method="([^"]*)"/gm)].map((m) => m[1]));
    expect(methods).toContain("other");
    expect([...methods].sort()).toEqual(expect.arrayContaining(["GET", "POST"]));
    for (const method of methods) expect(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"]).toContain(method);
  });
});
