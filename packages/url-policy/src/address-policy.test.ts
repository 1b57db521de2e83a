import { ipLiteral, isPublicAddress } from "./address-policy.js";

describe("isPublicAddress", () => {
  it.each(["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888"])("allows the public address %s", (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  it.each([
    ["loopback", "127.0.0.1"],
    ["loopback", "127.255.0.9"],
    ["loopback", "::1"],
    ["private 10/8", "10.1.2.3"],
    ["private 172.16/12", "172.16.0.1"],
    ["private 172.16/12", "172.31.255.254"],
    ["private 192.168/16", "192.168.1.1"],
    ["unique local fc00::/7", "fc00::1"],
    ["unique local fc00::/7", "fd12:3456::1"],
    ["link-local", "169.254.1.1"],
    ["cloud metadata (link-local)", "169.254.169.254"],
    ["link-local", "fe80::1"],
    ["CGNAT", "100.64.0.1"],
    ["multicast", "224.0.0.1"],
    ["multicast", "ff02::1"],
    ["unspecified", "0.0.0.0"],
    ["unspecified", "::"],
    ["reserved", "240.0.0.1"],
    ["broadcast", "255.255.255.255"],
    ["documentation", "192.0.2.1"],
    ["IPv4-mapped loopback", "::ffff:127.0.0.1"],
    // Mapped forms are refused even when the embedded IPv4 is public: one rule, no unwrapping.
    ["IPv4-mapped public", "::ffff:8.8.8.8"],
    ["NAT64 of loopback", "64:ff9b::7f00:1"],
    ["6to4 of loopback", "2002:7f00:1::1"],
  ])("refuses %s %s", (_label, address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(["", "not-an-ip", "example.com", "256.1.1.1", "8.8.8.8.8", "[::1]", "::1::2", "8.8.8.8/8", " 8.8.8.8"])(
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
