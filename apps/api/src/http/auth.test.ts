import { clientKeyOf } from "./auth.js";

describe("clientKeyOf: what the limiter of requests without a valid key counts", () => {
  it("counts every address of an IPv6 /64 as one client", () => {
    const key = clientKeyOf("2001:db8:1:2::1");
    for (const address of ["2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:0db8:0001:0002:1234:5678:9abc:def0", "2001:db8:1:2::"]) {
      expect(clientKeyOf(address)).toBe(key);
    }
  });

  it("tells different /64s apart", () => {
    expect(clientKeyOf("2001:db8:1:3::1")).not.toBe(clientKeyOf("2001:db8:1:2::1"));
    expect(clientKeyOf("2001:db8:1:2::1")).not.toBe(clientKeyOf("2001:db9:1:2::1"));
  });

  it("counts an IPv4-mapped IPv6 address as its IPv4 address; IPv4 addresses stay whole", () => {
    expect(clientKeyOf("::ffff:198.51.100.7")).toBe("198.51.100.7");
    expect(clientKeyOf("::ffff:c633:6407")).toBe("198.51.100.7");
    expect(clientKeyOf("198.51.100.7")).toBe("198.51.100.7");
    expect(clientKeyOf("198.51.100.8")).not.toBe(clientKeyOf("198.51.100.7"));
    expect(clientKeyOf("::1")).not.toBe(clientKeyOf("::ffff:127.0.0.1"));
  });

  it("leaves what is not an address as it is", () => {
    expect(clientKeyOf("unknown")).toBe("unknown");
  });
});
