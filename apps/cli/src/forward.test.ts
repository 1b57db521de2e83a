import { isLoopbackHost } from "./forward.js";

/** The hosts `npm run -s listen` forwards to without --allow-external (docs/develop-locally.md). */
test.each([
  ["localhost", true],
  ["LOCALHOST", true],
  ["app.localhost", true],
  ["127.0.0.1", true],
  ["127.255.3.4", true],
  ["[::1]", true],
  ["::1", true],
  ["128.0.0.1", false],
  ["10.0.0.1", false],
  ["0.0.0.0", false],
  ["127.0.0.256", false],
  ["127.0.0.1.example.com", false],
  ["localhost.example.com", false],
  ["example.com", false],
  ["[::2]", false],
])("%s is this machine: %s", (host, loopback) => {
  expect(isLoopbackHost(host)).toBe(loopback);
});
