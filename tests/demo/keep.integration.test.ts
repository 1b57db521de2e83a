import request from "supertest";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import { waitUntil } from "../support/wait.js";
import { SIGN_IN_LINE, startDemo } from "./run-demo.js";

/**
 * `npm run demo -- --keep` (issue 9, item 5): after the report everything keeps running and the
 * last line printed is a dashboard sign-in link, which a person can open: it signs in and shows
 * the demo's events. Ctrl-C then ends the demo with the report's exit code. Runs against the
 * tests' PostgreSQL and Redis (the demo uses a queue prefix and an account of its own).
 */

test("with --keep the last line is a sign-in link that opens the dashboard on the demo's events; Ctrl-C ends it", async () => {
  const demo = startDemo(["--keep"], { DATABASE_URL: testDatabaseUrl(), REDIS_URL: testRedisUrl() });
  try {
    const link = (await waitUntil(
      () => {
        if (demo.child.exitCode !== null)
          throw new Error(`the demo ended (${demo.child.exitCode}) before its link; output:\n${demo.output()}`);
        return SIGN_IN_LINE.exec(demo.stdoutLines().at(-1) ?? "")?.[1];
      },
      (found) => found !== undefined,
      240_000,
      250,
    ).catch((error: Error) => {
      throw new Error(`no sign-in link: ${error.message}; output:\n${demo.output()}`);
    }))!;
    expect(demo.output()).toContain("demo: OK");
    // Still the last line a moment later: nothing is printed after it.
    await new Promise((r) => setTimeout(r, 500));
    expect(demo.stdoutLines().at(-1)).toBe(`dashboard:  ${link}`);

    const url = new URL(link);
    const page = await request(url.origin).get(url.pathname);
    expect(page.status).toBe(200);
    expect(page.text).toContain(">Sign in</button>");
    const signedIn = await request(url.origin).post(url.pathname);
    expect(signedIn.status).toBe(303);
    const cookie = ([] as string[])
      .concat(signedIn.headers["set-cookie"] ?? [])
      .find((c) => c.startsWith("mailhooks_dashboard="))!
      .split(";")[0];
    const events = await request(url.origin).get("/dashboard/events").set("cookie", cookie);
    expect(events.status).toBe(200);
    expect(events.text).toMatch(/href="\/dashboard\/events\/evt_[0-9a-f]{32}"/);
  } finally {
    // Ctrl-C: everything stops (also when the test failed above).
    demo.child.kill("SIGINT");
    await demo.exited;
  }
  // After the report, Ctrl-C is the ordinary end: the exit code stays the report's.
  expect((await demo.exited).code).toBe(0);
}, 300_000);
