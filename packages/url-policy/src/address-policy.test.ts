import { ipLiteral, isPublicAddress } from "./address-policy.js";

/**
 * One row per entry of the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890
 * and updates): the first and last address of the entry must be refused, and the addresses
 * just outside it, where they are ordinary unicast, must stay allowed. Since an entry is a
 * contiguous prefix, refusing both ends and allowing both neighbours proves the policy covers
 * the whole entry and nothing beyond it.
 */
interface Entry {
  entry: string;
  source: string;
  inside: string[];
  outside?: string[];
}

const ipv4: Entry[] = [
  { entry: "0.0.0.0/8", source: "RFC 791 this network", inside: ["0.0.0.0", "0.255.255.255"], outside: ["1.0.0.0"] },
  {
    entry: "10.0.0.0/8",
    source: "RFC 1918 private",
    inside: ["10.0.0.0", "10.1.2.3", "10.255.255.255"],
    outside: ["9.255.255.255", "11.0.0.0"],
  },
  {
    entry: "100.64.0.0/10",
    source: "RFC 6598 CGNAT",
    inside: ["100.64.0.0", "100.127.255.255"],
    outside: ["100.63.255.255", "100.128.0.0"],
  },
  {
    entry: "127.0.0.0/8",
    source: "RFC 1122 loopback",
    inside: ["127.0.0.0", "127.0.0.1", "127.255.255.255"],
    outside: ["126.255.255.255", "128.0.0.0"],
  },
  {
    entry: "169.254.0.0/16",
    source: "RFC 3927 link-local (cloud metadata)",
    inside: ["169.254.0.0", "169.254.169.254", "169.254.255.255"],
    outside: ["169.253.255.255", "169.255.0.0"],
  },
  {
    entry: "172.16.0.0/12",
    source: "RFC 1918 private",
    inside: ["172.16.0.0", "172.31.255.255"],
    outside: ["172.15.255.255", "172.32.0.0"],
  },
  {
    entry: "192.0.0.0/24",
    source: "RFC 6890 IETF protocol assignments",
    inside: ["192.0.0.0", "192.0.0.255"],
    outside: ["191.255.255.255", "192.0.1.0"],
  },
  { entry: "192.0.0.0/29", source: "RFC 7335 IPv4 service continuity prefix", inside: ["192.0.0.0", "192.0.0.7"] },
  { entry: "192.0.0.8/32", source: "RFC 7600 IPv4 dummy address", inside: ["192.0.0.8"] },
  { entry: "192.0.0.9/32", source: "RFC 7723 PCP anycast", inside: ["192.0.0.9"] },
  { entry: "192.0.0.10/32", source: "RFC 8155 TURN anycast", inside: ["192.0.0.10"] },
  { entry: "192.0.0.170/32, 192.0.0.171/32", source: "RFC 7050 NAT64/DNS64 discovery", inside: ["192.0.0.170", "192.0.0.171"] },
  { entry: "192.0.2.0/24", source: "RFC 5737 TEST-NET-1", inside: ["192.0.2.0", "192.0.2.255"], outside: ["192.0.1.255", "192.0.3.0"] },
  {
    entry: "192.31.196.0/24",
    source: "RFC 7535 AS112-v4",
    inside: ["192.31.196.0", "192.31.196.255"],
    outside: ["192.31.195.255", "192.31.197.0"],
  },
  {
    entry: "192.52.193.0/24",
    source: "RFC 7450 AMT",
    inside: ["192.52.193.0", "192.52.193.255"],
    outside: ["192.52.192.255", "192.52.194.0"],
  },
  {
    entry: "192.88.99.0/24",
    source: "RFC 7526 deprecated 6to4 relay anycast (192.88.99.2/32: RFC 6751 6a44)",
    inside: ["192.88.99.0", "192.88.99.2", "192.88.99.255"],
    outside: ["192.88.98.255", "192.88.100.0"],
  },
  {
    entry: "192.168.0.0/16",
    source: "RFC 1918 private",
    inside: ["192.168.0.0", "192.168.1.1", "192.168.255.255"],
    outside: ["192.167.255.255", "192.169.0.0"],
  },
  {
    entry: "192.175.48.0/24",
    source: "RFC 7534 direct delegation AS112",
    inside: ["192.175.48.0", "192.175.48.255"],
    outside: ["192.175.47.255", "192.175.49.0"],
  },
  {
    entry: "198.18.0.0/15",
    source: "RFC 2544 benchmarking",
    inside: ["198.18.0.0", "198.19.255.255"],
    outside: ["198.17.255.255", "198.20.0.0"],
  },
  {
    entry: "198.51.100.0/24",
    source: "RFC 5737 TEST-NET-2",
    inside: ["198.51.100.0", "198.51.100.255"],
    outside: ["198.51.99.255", "198.51.101.0"],
  },
  {
    entry: "203.0.113.0/24",
    source: "RFC 5737 TEST-NET-3",
    inside: ["203.0.113.0", "203.0.113.255"],
    outside: ["203.0.112.255", "203.0.114.0"],
  },
  {
    entry: "224.0.0.0/4",
    source: "RFC 5771 multicast",
    inside: ["224.0.0.0", "224.0.0.1", "239.255.255.255"],
    outside: ["223.255.255.255"],
  },
  // The neighbour below is multicast and the entry ends at the top of the space.
  { entry: "240.0.0.0/4", source: "RFC 1112 reserved", inside: ["240.0.0.0", "240.0.0.1", "255.255.255.254"] },
  { entry: "255.255.255.255/32", source: "RFC 919 limited broadcast", inside: ["255.255.255.255"] },
];

const MAX_TAIL = "ffff:ffff:ffff:ffff:ffff";

// Entries below 2000::/3 have no ordinary unicast neighbours: everything outside the global
// unicast space is refused, so their "outside" is left out.
const ipv6: Entry[] = [
  { entry: "::/128", source: "RFC 4291 unspecified", inside: ["::"] },
  { entry: "::1/128", source: "RFC 4291 loopback", inside: ["::1"] },
  {
    entry: "::/96 (not in the registry)",
    source: "RFC 4291 deprecated IPv4-compatible",
    inside: ["::2", "::8.8.8.8", "::127.0.0.1", "::ffff:ffff"],
  },
  {
    entry: "::ffff:0:0/96",
    source: "RFC 4291 IPv4-mapped",
    inside: ["::ffff:0.0.0.0", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:255.255.255.255"],
  },
  { entry: "::ffff:0:0:0/96 (not in the registry)", source: "RFC 6145 IPv4-translated", inside: ["::ffff:0:8.8.8.8", "::ffff:0:7f00:1"] },
  { entry: "64:ff9b::/96", source: "RFC 6052 NAT64", inside: ["64:ff9b::", "64:ff9b::7f00:1", "64:ff9b::8.8.8.8", "64:ff9b::ffff:ffff"] },
  { entry: "64:ff9b:1::/48", source: "RFC 8215 local-use NAT64", inside: ["64:ff9b:1::", "64:ff9b:1::808:808", `64:ff9b:1:${MAX_TAIL}`] },
  { entry: "100::/64", source: "RFC 6666 discard-only", inside: ["100::", "100::1", "100::ffff:ffff:ffff:ffff"] },
  {
    entry: "100:0:0:1::/64",
    source: "RFC 9780 dummy IPv6 prefix",
    inside: ["100:0:0:1::", "100:0:0:1::1", "100:0:0:1:ffff:ffff:ffff:ffff"],
  },
  {
    entry: "2001::/23",
    source: "RFC 2928 IETF protocol assignments",
    inside: ["2001::", `2001:1ff:ffff:${MAX_TAIL}`],
    outside: [`2000:ffff:ffff:${MAX_TAIL}`, "2001:200::"],
  },
  { entry: "2001::/32", source: "RFC 4380 Teredo", inside: ["2001::", "2001:0:4136:e378:8000:63bf:3fff:fdd2", `2001:0:ffff:${MAX_TAIL}`] },
  { entry: "2001:1::1/128", source: "RFC 7723 PCP anycast", inside: ["2001:1::1"] },
  { entry: "2001:1::2/128", source: "RFC 8155 TURN anycast", inside: ["2001:1::2"] },
  { entry: "2001:1::3/128", source: "RFC 9665 DNS-SD SRP anycast", inside: ["2001:1::3"] },
  { entry: "2001:2::/48", source: "RFC 5180 benchmarking", inside: ["2001:2::", "2001:2::1", `2001:2:0:${MAX_TAIL}`] },
  { entry: "2001:3::/32", source: "RFC 7450 AMT", inside: ["2001:3::", `2001:3:ffff:${MAX_TAIL}`] },
  { entry: "2001:4:112::/48", source: "RFC 7535 AS112-v6", inside: ["2001:4:112::", `2001:4:112:${MAX_TAIL}`] },
  { entry: "2001:10::/28", source: "RFC 4843 deprecated ORCHID", inside: ["2001:10::", `2001:1f:ffff:${MAX_TAIL}`] },
  { entry: "2001:20::/28", source: "RFC 7343 ORCHIDv2", inside: ["2001:20::", `2001:2f:ffff:${MAX_TAIL}`] },
  { entry: "2001:30::/28", source: "RFC 9374 drone remote ID tags", inside: ["2001:30::", `2001:3f:ffff:${MAX_TAIL}`] },
  {
    entry: "2001:db8::/32",
    source: "RFC 3849 documentation",
    inside: ["2001:db8::", "2001:db8::1", `2001:db8:ffff:${MAX_TAIL}`],
    outside: [`2001:db7:ffff:${MAX_TAIL}`, "2001:db9::"],
  },
  {
    entry: "2002::/16",
    source: "RFC 3056 6to4",
    inside: ["2002::", "2002:7f00:1::1", "2002:808:808::1", `2002:ffff:ffff:${MAX_TAIL}`],
    outside: [`2001:ffff:ffff:${MAX_TAIL}`, "2003::"],
  },
  {
    entry: "2620:4f:8000::/48",
    source: "RFC 7534 direct delegation AS112",
    inside: ["2620:4f:8000::", `2620:4f:8000:${MAX_TAIL}`],
    outside: [`2620:4f:7fff:${MAX_TAIL}`, "2620:4f:8001::"],
  },
  {
    entry: "3fff::/20",
    source: "RFC 9637 documentation",
    inside: ["3fff::", `3fff:fff:ffff:${MAX_TAIL}`],
    outside: [`3ffe:ffff:ffff:${MAX_TAIL}`, "3fff:1000::"],
  },
  { entry: "5f00::/16", source: "RFC 9602 SRv6 SIDs", inside: ["5f00::", `5f00:ffff:ffff:${MAX_TAIL}`] },
  { entry: "fc00::/7", source: "RFC 4193 unique local", inside: ["fc00::", "fc00::1", "fd12:3456::1", `fdff:ffff:ffff:${MAX_TAIL}`] },
  { entry: "fe80::/10", source: "RFC 4291 link-local", inside: ["fe80::", "fe80::1", `febf:ffff:ffff:${MAX_TAIL}`] },
  { entry: "fec0::/10 (not in the registry)", source: "RFC 3879 deprecated site-local", inside: ["fec0::1"] },
  { entry: "ff00::/8", source: "RFC 4291 multicast", inside: ["ff00::", "ff02::1", `ffff:ffff:ffff:${MAX_TAIL}`] },
];

const entries = [...ipv4, ...ipv6];
const insideCases = entries.flatMap((e) => e.inside.map((address) => [address, e.entry, e.source]));
const outsideCases = entries.flatMap((e) => (e.outside ?? []).map((address) => [address, e.entry, e.source]));

describe("isPublicAddress", () => {
  it.each(["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::1", "2001:4860:4860::8888"])(
    "allows the public address %s",
    (address) => {
      expect(isPublicAddress(address)).toBe(true);
    },
  );

  it.each(insideCases)("refuses %s, inside %s (%s)", (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(outsideCases)("allows %s, just outside %s (%s)", (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  // ipaddr.js 1.9.1 (Express's copy, loaded while the package was undeclared) calls these
  // "unicast": deliveries to them were allowed.
  it.each(["198.18.0.1", "192.31.196.1", "2001:2::1", "100::1"])("refuses %s, which ipaddr.js 1.9.1 calls unicast", (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it("refuses an address with a zone index, even a global one", () => {
    expect(isPublicAddress("fe80::1%eth0")).toBe(false);
    expect(isPublicAddress("2001:4860:4860::8888%eth0")).toBe(false);
  });

  it.each(["", "not-an-ip", "example.com", "256.1.1.1", "8.8.8.8.8", "[::1]", "::1::2", "8.8.8.8/8", " 8.8.8.8", "134744072", "0x8.8.8.8"])(
    "refuses the invalid string %p",
    (address) => {
      expect(isPublicAddress(address)).toBe(false);
    },
  );
});

describe("ipLiteral", () => {
  it("unwraps a bracketed IPv6 hostname", () => {
    expect(ipLiteral("[::1]")).toBe("::1");
    expect(ipLiteral("[2001:db8::1]")).toBe("2001:db8::1");
  });

  it("returns an IPv4 literal as is", () => {
    expect(ipLiteral("127.0.0.1")).toBe("127.0.0.1");
  });

  it("returns null for a DNS name", () => {
    expect(ipLiteral("example.com")).toBeNull();
    expect(ipLiteral("localhost")).toBeNull();
  });

  it("matches what URL.hostname gives for literals", () => {
    expect(ipLiteral(new URL("https://[::ffff:127.0.0.1]:8443/x").hostname)).toBe("::ffff:7f00:1");
    expect(ipLiteral(new URL("https://0x7f.1/x").hostname)).toBe("127.0.0.1"); // WHATWG URL normalizes
  });
});
