import type dns from "node:dns";
import net from "node:net";
import { BLOCKED_CODE } from "./address-policy.js";
import { createPublicOnlyLookup, type LookupAllFunction } from "./lookup.js";

/** A resolver that answers `addresses` for every name (or fails with `code`), recording its calls. */
function resolver(addresses: string[], code?: string): { lookup: LookupAllFunction; calls: dns.LookupAllOptions[] } {
  const calls: dns.LookupAllOptions[] = [];
  const lookup: LookupAllFunction = (_hostname, options, callback) => {
    calls.push(options);
    setImmediate(() => {
      if (code) return callback(Object.assign(new Error(code), { code }), []);
      callback(
        null,
        addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
      );
    });
  };
  return { lookup, calls };
}

interface Answer {
  err: NodeJS.ErrnoException | null;
  address: string | dns.LookupAddress[];
  family?: number;
}

function ask(lookup: ReturnType<typeof createPublicOnlyLookup>, options: dns.LookupOptions): Promise<Answer> {
  return new Promise((resolve) => lookup("hooks.example.com", options, (err, address, family) => resolve({ err, address, family })));
}

describe("createPublicOnlyLookup", () => {
  it.each([
    ["a public and a private address", ["8.8.8.8", "10.0.0.1"]],
    ["a private address first", ["10.0.0.1", "8.8.8.8"]],
    ["loopback only", ["127.0.0.1"]],
    ["a public IPv4 and IPv6 loopback", ["8.8.8.8", "::1"]],
    ["cloud metadata among public ones", ["1.1.1.1", "169.254.169.254", "8.8.4.4"]],
  ])("refuses a name with %s, whatever the caller asked", async (_label, addresses) => {
    for (const all of [true, false]) {
      const { err, address } = await ask(createPublicOnlyLookup(resolver(addresses).lookup), { all });
      expect(err?.code).toBe(BLOCKED_CODE);
      expect(address).toEqual([]);
    }
  });

  it("gives `all: true` callers every address when all are public", async () => {
    const { lookup, calls } = resolver(["8.8.8.8", "1.1.1.1"]);
    const answer = await ask(createPublicOnlyLookup(lookup), { all: true, family: 0 });
    expect(answer.err).toBeNull();
    expect(answer.address).toEqual([
      { address: "8.8.8.8", family: 4 },
      { address: "1.1.1.1", family: 4 },
    ]);
    // The whole answer is always asked for, the caller's other options kept.
    expect(calls).toEqual([{ all: true, family: 0 }]);
  });

  it("gives `all: false` callers the first address and its family", async () => {
    const { lookup, calls } = resolver(["2001:4860:4860::8888", "8.8.8.8"]);
    const answer = await ask(createPublicOnlyLookup(lookup), { family: 0, hints: 32 });
    expect(answer).toEqual({ err: null, address: "2001:4860:4860::8888", family: 6 });
    expect(calls).toEqual([{ all: true, family: 0, hints: 32 }]);
  });

  it("passes resolver errors through", async () => {
    const { err } = await ask(createPublicOnlyLookup(resolver([], "ENOTFOUND").lookup), { all: true });
    expect(err?.code).toBe("ENOTFOUND");
  });

  it("fails an empty answer as not found rather than connecting nowhere", async () => {
    const { err } = await ask(createPublicOnlyLookup(resolver([]).lookup), { all: false });
    expect(err?.code).toBe("ENOTFOUND");
  });

  it("by default uses dns.lookup, and net.connect honours the refusal", async () => {
    // localhost resolves (through /etc/hosts) to loopback only: the connection is never made.
    const error = await new Promise<NodeJS.ErrnoException>((resolve, reject) => {
      const socket = net.connect({ host: "localhost", port: 9, lookup: createPublicOnlyLookup() });
      socket.once("connect", () => reject(new Error("connected to loopback")));
      socket.once("error", resolve);
    });
    expect(error.code).toBe(BLOCKED_CODE);
  });
});
