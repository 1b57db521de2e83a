import { randomUUID } from "node:crypto";
import getPort from "get-port";
import { createApiKey } from "@mailhooks/access";
import { runCli } from "../support/cli.js";
import { testDatabaseUrl } from "../support/env.js";
import { startStack, type Stack } from "../support/stack.js";

/**
 * The keys command as a user runs it (docs/operations.md, "Commands"): an account that does not
 * exist is an error, and `dashboard-link` prints a link to the API that really answers: on
 * `--base-url`, else PUBLIC_URL, else this machine's PORT, where an API must then answer.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack?.close());

const env = (more: Record<string, string | undefined>) => ({
  DATABASE_URL: testDatabaseUrl(),
  PUBLIC_URL: undefined,
  PORT: undefined,
  ...more,
});

test("`keys list --account` of an account that does not exist says so and exits 1; one with keys lists them", async () => {
  const nobody = `nosuch-${randomUUID()}`;
  const missing = await runCli("keys", ["list", "--account", nobody], env({}));
  expect(missing).toMatchObject({ code: 1, stdout: "", stderr: `keys: no account named ${nobody}\n` });
  const json = await runCli("keys", ["list", "--account", nobody, "--json"], env({}));
  expect(json).toMatchObject({ code: 1, stdout: "" });

  const name = `keys-list-${randomUUID()}`;
  const issued = await createApiKey(stack.prisma, name, "ci");
  const listed = await runCli("keys", ["list", "--account", name], env({}));
  expect(listed).toMatchObject({ code: 0, stderr: "" });
  expect(listed.stdout).toMatch(new RegExp(`^${issued.id} {2}whk_[0-9a-f]{12}… {2}ci {2}created `));
});

test("`keys dashboard-link` with the API's PORT prints a link on that port, which signs in", async () => {
  const name = `keys-link-${randomUUID()}`;
  await createApiKey(stack.prisma, name);
  const port = new URL(stack.baseUrl).port;
  const run = await runCli("keys", ["dashboard-link", "--account", name], env({ PORT: port }));
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
  expect(run.stdout).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/dashboard/sign-in/[0-9a-f]{12}[A-Za-z0-9_-]{43}\\n$`));
  const page = await fetch(run.stdout.trim());
  expect(page.status).toBe(200);
  const signedIn = await fetch(run.stdout.trim(), { method: "POST", redirect: "manual" });
  expect(signedIn.status).toBe(303);
});

test("`keys dashboard-link` where no API answers on PORT prints no link, says why and exits 1; --base-url is taken as given", async () => {
  const name = `keys-link-${randomUUID()}`;
  await createApiKey(stack.prisma, name);
  const closed = await getPort({ host: "127.0.0.1" });
  const run = await runCli("keys", ["dashboard-link", "--account", name], env({ PORT: String(closed) }));
  expect(run).toMatchObject({
    code: 1,
    stdout: "",
    stderr: `keys: no API answers at http://127.0.0.1:${closed} (PORT=${closed}): run this with the API's PORT or PUBLIC_URL, or give --base-url\n`,
  });

  const given = await runCli("keys", ["dashboard-link", "--account", name, "--base-url", "https://hooks.example.com"], env({}));
  expect({ code: given.code, stderr: given.stderr }).toEqual({ code: 0, stderr: "" });
  expect(given.stdout).toMatch(/^https:\/\/hooks\.example\.com\/dashboard\/sign-in\/[0-9a-f]{12}[A-Za-z0-9_-]{43}\n$/);
  const bad = await runCli("keys", ["dashboard-link", "--account", name, "--base-url", "hooks.example.com"], env({}));
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("must be an absolute URL");
});
