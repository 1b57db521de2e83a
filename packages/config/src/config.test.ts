import { INSECURE_DEVELOPMENT_KEY } from "@mailhooks/secrets";
import { apiConfigSchema, ConfigError, dispatcherConfigSchema, loadConfig, usesInsecureDevelopmentKey } from "./index.js";

// The defaults of CONTRACT.md section 2, copied from its table.
const CONTRACT_DEFAULTS = {
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
  it("API defaults are CONTRACT.md's", () => {
    const config = loadConfig(apiConfigSchema, {});
    expect(config).toMatchObject({ ...CONTRACT_DEFAULTS, PORT: 3000 });
    expect(config.ADMIN_USERNAME).toBeUndefined();
    expect(config.ADMIN_PASSWORD).toBeUndefined();
  });

  it("dispatcher defaults are CONTRACT.md's", () => {
    expect(loadConfig(dispatcherConfigSchema, {})).toMatchObject({ ...CONTRACT_DEFAULTS, METRICS_PORT: 9464 });
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
    expect(loadConfig(apiConfigSchema, {})).toMatchObject({ ALLOW_PRIVATE_TARGETS: false, PRIVATE_TARGETS: false });
    expect(loadConfig(apiConfigSchema, { ALLOW_PRIVATE_TARGETS: "false" })).toMatchObject({
      ALLOW_PRIVATE_TARGETS: false,
      PRIVATE_TARGETS: false,
    });
    expect(loadConfig(dispatcherConfigSchema, { ALLOW_PRIVATE_TARGETS: "true" })).toMatchObject({
      ALLOW_PRIVATE_TARGETS: true,
      PRIVATE_TARGETS: true,
    });
    expect(loadConfig(dispatcherConfigSchema, { ALLOW_PRIVATE_TARGETS: "127.0.0.0/8, ::1/128,10.1.2.3/8,127.0.0.0/8" })).toMatchObject({
      ALLOW_PRIVATE_TARGETS: true,
      PRIVATE_TARGETS: { ranges: ["127.0.0.0/8", "::1/128", "10.0.0.0/8"] },
    });
  });

  it("PRIVATE_TARGETS is never read from the environment", () => {
    expect(loadConfig(apiConfigSchema, { PRIVATE_TARGETS: "true" })).toMatchObject({
      ALLOW_PRIVATE_TARGETS: false,
      PRIVATE_TARGETS: false,
    });
    expect(loadConfig(apiConfigSchema, { PRIVATE_TARGETS: "nonsense", ALLOW_PRIVATE_TARGETS: "::1/128" }).PRIVATE_TARGETS).toEqual({
      ranges: ["::1/128"],
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

  it("DISPATCHER_WEBHOOK_JOB_LIMIT is 16 by default and at most 1,250 (a fast webhook's 64 times it: 80,000 jobs in Redis)", () => {
    expect(loadConfig(dispatcherConfigSchema, {}).DISPATCHER_WEBHOOK_JOB_LIMIT).toBe(16);
    expect(loadConfig(dispatcherConfigSchema, { DISPATCHER_WEBHOOK_JOB_LIMIT: "1250" }).DISPATCHER_WEBHOOK_JOB_LIMIT).toBe(1250);
    const error = configErrorOf(() => loadConfig(dispatcherConfigSchema, { DISPATCHER_WEBHOOK_JOB_LIMIT: "1251" }));
    expect(error.message).toContain("DISPATCHER_WEBHOOK_JOB_LIMIT");
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

describe("RELAY_PUSH_TIMEOUT_MS and RELAY_LOCK_TIMEOUT_MS", () => {
  it("default to 10 s and 15 s; the lock timeout must exceed the push timeout", () => {
    expect(loadConfig(dispatcherConfigSchema, {})).toMatchObject({ RELAY_PUSH_TIMEOUT_MS: 10_000, RELAY_LOCK_TIMEOUT_MS: 15_000 });
    expect(loadConfig(dispatcherConfigSchema, { RELAY_PUSH_TIMEOUT_MS: "1000", RELAY_LOCK_TIMEOUT_MS: "2000" })).toMatchObject({
      RELAY_PUSH_TIMEOUT_MS: 1000,
      RELAY_LOCK_TIMEOUT_MS: 2000,
    });
    const error = configErrorOf(() => loadConfig(dispatcherConfigSchema, { RELAY_PUSH_TIMEOUT_MS: "5000", RELAY_LOCK_TIMEOUT_MS: "5000" }));
    expect(error.message).toContain("RELAY_LOCK_TIMEOUT_MS: must exceed RELAY_PUSH_TIMEOUT_MS");
  });
});

describe("OUTBOX_VACUUM_INTERVAL_MS", () => {
  it("defaults to 5 s; 0 turns the VACUUM off; anything else is at least 1 s", () => {
    expect(loadConfig(dispatcherConfigSchema, {})).toMatchObject({ OUTBOX_VACUUM_INTERVAL_MS: 5_000 });
    expect(loadConfig(dispatcherConfigSchema, { OUTBOX_VACUUM_INTERVAL_MS: "0" })).toMatchObject({ OUTBOX_VACUUM_INTERVAL_MS: 0 });
    const error = configErrorOf(() => loadConfig(dispatcherConfigSchema, { OUTBOX_VACUUM_INTERVAL_MS: "500" }));
    expect(error.message).toContain("OUTBOX_VACUUM_INTERVAL_MS: must be 0 or at least 1000");
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
