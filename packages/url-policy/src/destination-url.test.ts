import { checkDestinationUrl, normalizeDestinationUrl } from "./destination-url.js";

/**
 * Issue 32 item 6: a destination is stored as the WHATWG URL parser reads it, the host in ASCII,
 * so that what is stored, shown, checked and connected to is one text.
 */
describe("normalizeDestinationUrl", () => {
  test.each([
    ["https://127。0。0。1/", "https://127.0.0.1/"],
    ["https://127．0．0．1:8443/hook", "https://127.0.0.1:8443/hook"],
    ["https://ＥＸＡＭＰＬＥ.com/hooks", "https://example.com/hooks"],
    ["https://bücher.example/hooks", "https://xn--bcher-kva.example/hooks"],
    ["HTTPS://Example.COM", "https://example.com/"],
    ["https://example.com:443/a b?x=ü#frag", "https://example.com/a%20b?x=%C3%BC#frag"],
    ["https://0x7f.1/", "https://127.0.0.1/"],
    ["https://[::FFFF:7f00:1]/", "https://[::ffff:7f00:1]/"],
    ["https://example.com/hooks/email", "https://example.com/hooks/email"],
  ])("%s is stored as %s", (given, stored) => {
    expect(normalizeDestinationUrl(given)).toEqual({ url: stored });
    // Normalized once, it stays as it is.
    expect(normalizeDestinationUrl(stored)).toEqual({ url: stored });
  });

  test.each([
    ["http://example.com/", "not_https_url"],
    [" https://example.com/", "not_https_url"],
    ["https:example.com", "not_https_url"],
    ["https:/example.com", "not_https_url"],
    ["//example.com", "not_https_url"],
    ["https://", "not_https_url"],
    ["https://exa mple.com/", "not_https_url"],
    ["https://user:pass@example.com/", "credentials"],
    ["https://user@example.com/", "credentials"],
  ])("%s is refused: %s", (given, problem) => {
    expect(normalizeDestinationUrl(given)).toEqual({ problem });
  });

  test("the address policy sees the literal the normalized URL names", () => {
    const { url } = normalizeDestinationUrl("https://127。0。0。1/") as { url: string };
    expect(checkDestinationUrl(url, { allowPrivateTargets: false })).toBe("blocked_destination");
  });
});
