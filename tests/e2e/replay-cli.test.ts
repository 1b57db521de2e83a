import { runCli } from "../support/cli.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";

/** `npm run -s replay -- ARGS` as a user runs it, against the stack's API. */
const replay = (stackUrl: string, apiKey: string, args: string[]) => runCli("replay", args, { API_URL: stackUrl, API_KEY: apiKey });

/**
 * A run's per-event lines as `<event id> <outcome> <detail>`, sorted, with a dry run's words made
 * the real run's (`would replay` → `replayed`, `would fail` → `failed`).
 */
const linesOf = (stdout: string) =>
  stdout
    .split("\n")
    .filter((line) => line.startsWith("["))
    .map((line) =>
      line
        .replace(/^\[\d+\/\d+\] /, "")
        .replace(/^would replay/, "replayed")
        .replace(/^would fail/, "failed")
        .replace(/^(\S+)\s+(\S+) /, "$2 $1 "),
    )
    .sort();

describe("bulk replay CLI", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "50,50,50", DELIVERY_TIMEOUT_MS: "1000" } });
  });
  afterAll(() => stack.close());

  test("replays each failed event once, skips expired ones, reports a failed call and goes on", async () => {
    const account = await stack.newAccount();
    const secrets = new Map<string, string>();
    const receiver = await stack.startReceiver({
      secretFor: (p) => secrets.get(p),
      behavior: (a) => (a.event === "message.sent" ? { status: 500 } : {}),
    });
    const hook = await account.api("POST", "/v1/webhooks", { url: receiver.url("/x"), events: ["message.sent"] });
    secrets.set("/x", hook.body.secret);
    const since = new Date(Date.now() - 1000).toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") })).body.event_id);
    for (const id of ids)
      await waitUntil(
        () => account.api("GET", `/v1/events/${id}`),
        (r) => r.body.status === "failed",
      );
    // One expired event, and one failed event whose webhook is gone (its replay answers 409).
    await stack.prisma.$executeRaw`DELETE FROM event_payloads WHERE event_id = ${ids[0]}`;
    const other = await account.api("POST", "/v1/webhooks", { url: receiver.url("/y"), events: ["message.opened"] });
    secrets.set("/y", other.body.secret);
    const opened = await account.api("POST", "/v1/events", { event_type: "message.opened", data: sampleData("message.opened") });
    // Let its delivery end first, so that nothing changes the status forced below.
    await waitUntil(
      () => account.api("GET", `/v1/events/${opened.body.event_id}`),
      (r) => r.body.status === "delivered",
    );
    await account.api("PATCH", `/v1/webhooks/${other.body.id}`, { status: "disabled" });
    await stack.prisma.$executeRaw`UPDATE destinations SET status = 'failed' WHERE event_id = ${opened.body.event_id}`;
    await stack.prisma.$executeRaw`UPDATE events SET status = 'failed' WHERE id = ${opened.body.event_id}`;
    await account.api("DELETE", `/v1/webhooks/${other.body.id}`);
    const until = new Date(Date.now() + 1000).toISOString();

    // The dry run predicts the real run, event by event, and exits as it will.
    const dry = await replay(stack.baseUrl, account.apiKey, ["--since", since, "--until", until, "--status", "failed", "--dry-run"]);
    expect(dry.stdout).toContain("summary: matched 4, would replay 2, skipped as expired 1, would fail 1");
    expect(dry.code).toBe(1);
    expect((await account.api("GET", "/v1/audit-log")).body.data).toHaveLength(0);

    const run = await replay(stack.baseUrl, account.apiKey, ["--since", since, "--until", until, "--status", "failed", "--pause-ms", "10"]);
    expect(run.stdout).toContain("summary: matched 4, replayed 2, skipped as expired 1, failed 1");
    expect(run.stdout).toMatch(/failed\s+evt_\w+ 409 conflict/);
    expect(run.code).toBe(1);
    expect(linesOf(dry.stdout)).toEqual(linesOf(run.stdout));
    const audit = await waitUntil(
      () => account.api("GET", "/v1/audit-log"),
      (r) => r.body.data.length === 2,
    );
    expect(audit.body.data.map((e: any) => e.event_id).sort()).toEqual([ids[1], ids[2]].sort());
  });

  test("with --target-url, events of several webhooks are refused without --webhook-id by the dry run as by the real run", async () => {
    const account = await stack.newAccount();
    const secrets = new Map<string, string>();
    const receiver = await stack.startReceiver({ secretFor: (p) => secrets.get(p) });
    const hooks = [];
    for (const p of ["/a", "/b"]) {
      const hook = await account.api("POST", "/v1/webhooks", { url: receiver.url(p), events: ["message.sent"] });
      secrets.set(p, hook.body.secret);
      hooks.push(hook.body.id as string);
    }
    secrets.set("/staging", secrets.get("/a")!);
    const since = new Date(Date.now() - 1000).toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 2; i++)
      ids.push((await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") })).body.event_id);
    const until = new Date(Date.now() + 1000).toISOString();
    const args = ["--since", since, "--until", until, "--target-url", receiver.url("/staging"), "--pause-ms", "0"];

    const dry = await replay(stack.baseUrl, account.apiKey, [...args, "--dry-run"]);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toContain("summary: matched 2, would replay 0, skipped as expired 0, would fail 2");
    expect(dry.stdout).toContain(
      "409 conflict: the event has several destinations: name the one whose secret signs the replay with webhook_id",
    );
    const run = await replay(stack.baseUrl, account.apiKey, args);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("summary: matched 2, replayed 0, skipped as expired 0, failed 2");
    expect(linesOf(dry.stdout)).toEqual(linesOf(run.stdout));

    // Naming the webhook whose secret signs: both agree again, and the replays go out.
    const named = [...args, "--webhook-id", hooks[0]];
    const dryNamed = await replay(stack.baseUrl, account.apiKey, [...named, "--dry-run"]);
    expect(dryNamed.stdout).toContain("summary: matched 2, would replay 2, skipped as expired 0, would fail 0");
    expect(dryNamed.code).toBe(0);
    const runNamed = await replay(stack.baseUrl, account.apiKey, named);
    expect(runNamed.stdout).toContain("summary: matched 2, replayed 2, skipped as expired 0, failed 0");
    expect(runNamed.code).toBe(0);
    expect(linesOf(dryNamed.stdout)).toEqual(linesOf(runNamed.stdout));
    await waitUntil(
      () => account.api("GET", "/v1/audit-log"),
      (r) => r.body.data.length === 2 && r.body.data.every((e: { response_status: number | null }) => e.response_status === 200),
    );
  });

  test("an event of a paused webhook: the dry run predicts a replay, as the real run makes one (it waits for the resume)", async () => {
    const account = await stack.newAccount();
    let secret: string | undefined;
    const receiver = await stack.startReceiver({ secretFor: () => secret });
    const hook = await account.api("POST", "/v1/webhooks", { url: receiver.url("/paused"), events: ["message.sent"] });
    secret = hook.body.secret as string;
    expect((await account.api("PATCH", `/v1/webhooks/${hook.body.id}`, { status: "paused" })).status).toBe(200);
    const since = new Date(Date.now() - 1000).toISOString();
    await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const until = new Date(Date.now() + 1000).toISOString();
    const args = ["--since", since, "--until", until, "--pause-ms", "0"];

    const dry = await replay(stack.baseUrl, account.apiKey, [...args, "--dry-run"]);
    expect(dry.stdout).toContain("summary: matched 1, would replay 1, skipped as expired 0, would fail 0");
    expect(dry.code).toBe(0);
    const run = await replay(stack.baseUrl, account.apiKey, args);
    expect(run.stdout).toContain("summary: matched 1, replayed 1, skipped as expired 0, failed 0");
    expect(run.code).toBe(0);
    expect(linesOf(dry.stdout)).toEqual(linesOf(run.stdout));
  });

  test("refuses bad arguments with a message naming them", async () => {
    const res = await replay(stack.baseUrl, stack.apiKey, ["--since", "yesterday", "--until", new Date().toISOString()]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("since");
  });
});
