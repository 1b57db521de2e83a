import type dns from "node:dns";
import { BLOCKED_CODE } from "./address-policy.js";
import { checkDestinationUrl } from "./destination-url.js";
import { createPublicOnlyLookup } from "./lookup.js";
import { isAllowedAddress, parsePrivateTargets, type PrivateTargets } from "./private-targets.js";

/** ALLOW_PRIVATE_TARGETS: false, true, or the ranges also allowed (issue 34 item 7). */
describe("parsePrivateTargets", () => {
  test.each([
    ["false", false],
    ["0", false],
    ["true", true],
    [" 1 ", true],
    ["127.0.0.0/8,::1/128", { ranges: ["127.0.0.0/8", "::1/128"] }],
    ["127.0.0.1/8 , 10.20.30.40/16", { ranges: ["127.0.0.0/8", "10.20.0.0/16"] }],
    ["::1/128,0:0:0:0:0:0:0:1/128", { ranges: ["::1/128"] }],
    ["fd12:3456::1/16", { ranges: ["fd12::/16"] }],
    ["192.168.1.7/32", { ranges: ["192.168.1.7/32"] }],
  ])("%p", (text, targets) => {
    expect(parsePrivateTargets(text)).toEqual(targets);
  });

  test.each([
    "",
    "yes",
    "localhost",
    "127.0.0.0",
    "127.0.0.0/33",
    "::1/129",
    "127.1/8",
    "0x7f000001/8",
    "127.0.0.0/8,",
    "127.0.0.0/8/8",
    "fe80::1%eth0/64",
    "127.0.0.0/-1",
  ])("%p is refused, naming the entry", (text) => {
    expect(() => parsePrivateTargets(text)).toThrow(/must be false, true, or comma-separated CIDR ranges/);
  });
});

describe("isAllowedAddress", () => {
  const loopback = parsePrivateTargets("127.0.0.0/8,::1/128");
  test.each<[string, PrivateTargets, boolean]>([
    ["8.8.8.8", false, true],
    ["8.8.8.8", loopback, true],
    ["127.0.0.1", false, false],
    ["127.0.0.1", true, true],
    ["127.0.0.1", loopback, true],
    ["127.255.255.254", loopback, true],
    ["::1", loopback, true],
    ["::ffff:127.0.0.1", loopback, true],
    ["10.0.0.1", loopback, false],
    ["169.254.169.254", loopback, false],
    ["::2", loopback, false],
    ["fe80::1%lo", loopback, false],
    ["localhost", loopback, false],
    ["localhost", true, false],
  ])("%s under %j: %p", (address, targets, allowed) => {
    expect(isAllowedAddress(address, targets)).toBe(allowed);
  });

  test("a URL's literal at registration", () => {
    expect(checkDestinationUrl("https://127.0.0.1:8443/h", { allowPrivateTargets: loopback })).toBeNull();
    expect(checkDestinationUrl("https://[::1]/h", { allowPrivateTargets: loopback })).toBeNull();
    expect(checkDestinationUrl("https://10.1.1.1/h", { allowPrivateTargets: loopback })).toBe("blocked_destination");
    expect(checkDestinationUrl("https://10.1.1.1/h", { allowPrivateTargets: true })).toBeNull();
    expect(checkDestinationUrl("https://hooks.example.com/h", { allowPrivateTargets: false })).toBeNull();
  });

  test("every resolved address at connect time: a name with one answer outside the ranges is refused whole", async () => {
    const answer = (addresses: string[]) =>
      new Promise<NodeJS.ErrnoException | null>((resolve) =>
        createPublicOnlyLookup(
          (_name, _options, callback) =>
            callback(
              null,
              addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
            ),
          loopback,
        )("hooks.example.com", { all: true }, (err: NodeJS.ErrnoException | null, _address: string | dns.LookupAddress[]) => resolve(err)),
      );
    expect(await answer(["127.0.0.1", "::1"])).toBeNull();
    expect(await answer(["8.8.8.8", "127.0.0.1"])).toBeNull();
    expect((await answer(["127.0.0.1", "10.0.0.1"]))?.code).toBe(BLOCKED_CODE);
  });
});
