import { INSECURE_DEVELOPMENT_KEY } from "@mailhooks/secrets";
import { apiConfigSchema, ConfigError, dispatcherConfigSchema, loadConfig, usesInsecureDevelopmentKey } from "./index.js";

// The defaults of docs/configuration.md, copied from its table.
const DOCUMENTED_DEFAULTS = {
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/webhooks",
  REDIS_URL: "redis://127.0.0.1:6379",
  QUEUE_PREFIX: "whk",
  DELIVERY_RETRY_DELAYS_MS: [10_000, 60_000, 300_000],
  DELIVERY_TIMEOUT_MS: 30_000,
  EVENT_RETENTION_DAYS: 90,
  ALLOW_PRIVATE_TARGETS: false,
  LOG_LEVEL: "info",
};

/** The ConfigError thrown by `fn`; fails the test if it throws anything else or nothing. */
function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError, nothing was thrown");
}

describe("defaults", () => {
  it("API defaults are the documented ones", () => {
    const config = loadConfig(apiConfigSchema, {});
    expect(config).toMatchObject({ ...DOCUMENTED_DEFAULTS, PORT: 3000 });
    expect(config.ADMIN_USERNAME).toBeUndefined();
    expect(config.ADMIN_PASSWORD).toBeUndefined();
  });

  it("dispatcher defaults are the documented ones", () => {
    expect(loadConfig(dispatcherConfigSchema, {})).toMatchObject({ ...DOCUMENTED_DEFAULTS, METRICS_PORT: 9464 });
  });

  it("an empty string counts as unset", () => {
    expect(loadConfig(apiConfigSchema, { PORT: "", DELIVERY_RETRY_DELAYS_MS: "" })).toMatchObject({
      PORT: 3000,
      DELIVERY_RETRY_DELAYS_MS: [10_000, 60_000, 300_000],
    });
  });
});

describe("parsing", () => {
  it("DELIVERY_RETRY_DELAYS_MS tolerates spaces around the commas", () => {
    expect(loadConfig(dispatcherConfigSchema, { DELIVERY_RETRY_DELAYS_MS: "200, 400,600" }).DELIVERY_RETRY_DELAYS_MS).toEqual([
      200, 400, 600,
    ]);
  });

  it("numbers and booleans are converted", () => {
    const config = loadConfig(dispatcherConfigSchema, { DELIVERY_TIMEOUT_MS: "1500", ALLOW_PRIVATE_TARGETS: "true", METRICS_PORT: "0" });
    expect(config).toMatchObject({ DELIVERY_TIMEOUT_MS: 1500, ALLOW_PRIVATE_TARGETS: true, METRICS_PORT: 0 });
  });
});

describe("ALLOW_PRIVATE_TARGETS (issue 34 item 7)", () => {
  it("false (the default), true, or a list of CIDR ranges, each normalized to its network", () => {
    expect(loadConfig(apiConfigSchema, {})).toMatchObject({ ALLOW_PRIVATE_TARGETS: false });
    expect(loadConfig(apiConfigSchema, { ALLOW_PRIVATE_TARGETS: "false" })).toMatchObject({ ALLOW_PRIVATE_TARGETS: false });
    expect(loadConfig(dispatcherConfigSchema, { ALLOW_PRIVATE_TARGETS: "true" })).toMatchObject({ ALLOW_PRIVATE_TARGETS: true });
    expect(loadConfig(dispatcherConfigSchema, { ALLOW_PRIVATE_TARGETS: "127.0.0.0/8, ::1/128,10.1.2.3/8,127.0.0.0/8" })).toMatchObject({
      ALLOW_PRIVATE_TARGETS: { ranges: ["127.0.0.0/8", "::1/128", "10.0.0.0/8"] },
    });
  });

  it("a bad list is told once, naming the variable and the entry", () => {
    const error = configErrorOf(() => loadConfig(apiConfigSchema, { ALLOW_PRIVATE_TARGETS: "127.0.0.0/8,localhost" }));
    expect(error.message).toBe(
      'invalid configuration: ALLOW_PRIVATE_TARGETS: must be false, true, or comma-separated CIDR ranges such as 127.0.0.0/8,::1/128 (not a range: "localhost")',
    );
  });
});

describe("bad values throw a ConfigError naming the variable", () => {
  it.each([
    ["DELIVERY_TIMEOUT_MS", "abc"],
    ["DELIVERY_TIMEOUT_MS", "-5"],
    ["ALLOW_PRIVATE_TARGETS", "maybe"],
    ["ALLOW_PRIVATE_TARGETS", "127.0.0.0/8,localhost"],
    ["ALLOW_PRIVATE_TARGETS", "127.0.0.0/33"],
    ["ALLOW_PRIVATE_TARGETS", "127.1/8"],
    ["ALLOW_PRIVATE_TARGETS", "127.0.0.0/8,"],
    ["ALLOW_PRIVATE_TARGETS", "fe80::1%eth0/64"],
    ["DATABASE_URL", "mysql://x"],
    ["REDIS_URL", "http://127.0.0.1:6379"],
    ["DELIVERY_RETRY_DELAYS_MS", "10s,60s"],
    ["EVENT_RETENTION_DAYS", "1.5"],
    ["PORT", "70000"],
    ["LOG_LEVEL", "loud"],
  ])("%s=%p", (name, value) => {
    const error = configErrorOf(() => loadConfig(apiConfigSchema, { [name]: value }));
    expect(error.message).toContain(name);
  });

  it("names every bad variable at once, and no good one", () => {
    const error = configErrorOf(() =>
      loadConfig(dispatcherConfigSchema, { DELIVERY_TIMEOUT_MS: "abc", METRICS_PORT: "x", QUEUE_PREFIX: "ok" }),
    );
    expect(error.message).toContain("DELIVERY_TIMEOUT_MS");
    expect(error.message).toContain("METRICS_PORT");
    expect(error.message).not.toContain("QUEUE_PREFIX");
  });
});

describe("SECRET_ENCRYPTION_KEYS", () => {
  const key = Buffer.alloc(32, 7).toString("base64");

  it("is required with NODE_ENV=production: the message names the variable", () => {
    for (const schema of [apiConfigSchema, dispatcherConfigSchema]) {
      const error = configErrorOf(() => loadConfig(schema, { NODE_ENV: "production" }));
      expect(error.message).toContain("SECRET_ENCRYPTION_KEYS");
      expect(error.message).toContain("NODE_ENV=production");
    }
  });

  it("outside production, unset means the public development key", () => {
    expect(loadConfig(apiConfigSchema, {}).SECRET_ENCRYPTION_KEYS).toEqual([INSECURE_DEVELOPMENT_KEY]);
  });

  it("is a comma-separated list of base64 32-byte keys", () => {
    expect(
      loadConfig(dispatcherConfigSchema, {
        NODE_ENV: "production",
        SECRET_ENCRYPTION_KEYS: `${key}, ${Buffer.alloc(32, 9).toString("base64")}`,
      }).SECRET_ENCRYPTION_KEYS,
    ).toHaveLength(2);
    const error = configErrorOf(() => loadConfig(apiConfigSchema, { SECRET_ENCRYPTION_KEYS: `${key},c2hvcnQ=` }));
    expect(error.message).toContain("SECRET_ENCRYPTION_KEYS");
    expect(error.message).toContain("key 2");
  });
});

describe("TRUST_PROXY", () => {
  const trust = (value?: string) => loadConfig(apiConfigSchema, { TRUST_PROXY: value }).TRUST_PROXY;

  it("is off by default; `true` means exactly one proxy hop, never every proxy (Express would believe the client's left-most entry)", () => {
    expect(trust()).toBe(false);
    expect(trust("false")).toBe(false);
    expect(trust("0")).toBe(false);
    expect(trust("true")).toBe(1);
  });

  it("takes a number of hops, or a comma-separated list of proxy addresses and CIDR ranges", () => {
    expect(trust("2")).toBe(2);
    expect(trust("10.0.0.0/8, 192.168.1.10,fd00::/8, ::1, loopback")).toEqual([
      "10.0.0.0/8",
      "192.168.1.10",
      "fd00::/8",
      "::1",
      "loopback",
    ]);
  });

  it.each(["yes", "-1", "10.0.0.0/33", "fd00::/129", "10.0.0.300", "example.com", "10.0.0.0/8,,", "1.5"])(
    "refuses %p, naming the variable",
    (value) => {
      expect(configErrorOf(() => trust(value)).message).toContain("TRUST_PROXY");
    },
  );
});

describe("ADMIN_PORT", () => {
  it("may not be the public PORT: the message names the variable", () => {
    const error = configErrorOf(() => loadConfig(apiConfigSchema, { PORT: "9000", ADMIN_PORT: "9000" }));
    expect(error.message).toContain("ADMIN_PORT");
    expect(error.message).toContain("PORT");
    expect(configErrorOf(() => loadConfig(apiConfigSchema, { PORT: "9465" })).message).toContain("ADMIN_PORT");
  });

  it("any other port is fine, and 0 (an ephemeral port each) for both too", () => {
    expect(loadConfig(apiConfigSchema, { PORT: "9000", ADMIN_PORT: "9001" })).toMatchObject({ PORT: 9000, ADMIN_PORT: 9001 });
    expect(loadConfig(apiConfigSchema, { PORT: "0", ADMIN_PORT: "0" })).toMatchObject({ PORT: 0, ADMIN_PORT: 0 });
  });
});

describe("DISPATCHER_VISIBILITY_TIMEOUT_MS", () => {
  it("defaults to 20 s; at least 300 ms (a heartbeat every third of it); anything less is refused, naming the variable", () => {
    expect(loadConfig(dispatcherConfigSchema, {}).DISPATCHER_VISIBILITY_TIMEOUT_MS).toBe(20_000);
    expect(loadConfig(dispatcherConfigSchema, { DISPATCHER_VISIBILITY_TIMEOUT_MS: "300" }).DISPATCHER_VISIBILITY_TIMEOUT_MS).toBe(300);
    for (const value of ["299", "0", "1.5", "abc"])
      expect(configErrorOf(() => loadConfig(dispatcherConfigSchema, { DISPATCHER_VISIBILITY_TIMEOUT_MS: value })).message).toContain(
        "DISPATCHER_VISIBILITY_TIMEOUT_MS",
      );
  });
});

describe("usesInsecureDevelopmentKey (start-up warning)", () => {
  const key = Buffer.alloc(32, 7).toString("base64");
  it("is true when the public development key is among the keys, false otherwise", () => {
    expect(usesInsecureDevelopmentKey(loadConfig(apiConfigSchema, {}))).toBe(true);
    expect(
      usesInsecureDevelopmentKey(loadConfig(dispatcherConfigSchema, { SECRET_ENCRYPTION_KEYS: `${key},${INSECURE_DEVELOPMENT_KEY}` })),
    ).toBe(true);
    expect(usesInsecureDevelopmentKey(loadConfig(dispatcherConfigSchema, { NODE_ENV: "production", SECRET_ENCRYPTION_KEYS: key }))).toBe(
      false,
    );
  });
});
