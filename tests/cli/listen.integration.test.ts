import http from "node:http";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { verify } from "@mailhooks/verify";
import { freePort, startNode, waitForExit, waitForOutput, type StartedProcess } from "@mailhooks/processes";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack } from "../support/stack.js";
import { deliveryRows } from "../support/hooks.js";

/**
 * `npm run -s listen` (docs/develop-locally.md) against a real stack (API and dispatcher on the
 * real PostgreSQL and Redis), run as a real process from source, forwarding to a plain HTTP
 * receiver on 127.0.0.1. Retries are shortened by DELIVERY_RETRY_DELAYS_MS; the API's 60 s
 * before an unanswered item is handed out again is not configurable, so that test waits it out.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const entry = path.join(root, "apps/cli/src/listen.ts");

interface Arrival {
  path: string;
  headers: Record<string, string>;
  body: string;
  eventId: string;
  kind: string;
}

/** What the local receiver does with a request: answer a status, or hold it unanswered. */
type Reply = number | "hold";

/** A plain HTTP receiver on 127.0.0.1 that keeps every request and answers by `reply`. */
async function startLocalReceiver(reply: (arrival: Arrival) => Reply = () => 200) {
  const arrivals: Arrival[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const arrival: Arrival = {
        path: req.url ?? "",
        headers: req.headers as Record<string, string>,
        body,
        eventId: String(req.headers["x-service-event-id"]),
        kind: (JSON.parse(body) as { event: string }).event,
      };
      arrivals.push(arrival);
      const answer = reply(arrival);
      if (answer === "hold") held.push(res);
      else res.writeHead(answer, { "content-type": "text/plain" }).end(`answered ${answer}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hooks`;
  return {
    url,
    arrivals,
    /** The arrivals of email events (not the webhook's test event). */
    events: () => arrivals.filter((a) => a.kind !== "webhook.test"),
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("npm run -s listen", () => {
  let stack: Stack;
  const running: StartedProcess[] = [];
  const closers: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,300,300" } });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.stop(2_000)));
    await Promise.all(closers.splice(0).map((close) => close()));
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** The CLI as its script runs it (tsx, the `source` condition), with `apiKey` in API_KEY. */
  const listen = (args: string[], apiKey: string, apiUrl = stack.baseUrl) => {
    const p = startNode("listen", entry, {
      cwd: root,
      args,
      env: { NODE_OPTIONS: undefined, API_URL: apiUrl, API_KEY: apiKey },
    });
    running.push(p);
    return p;
  };
  const receiver = async (reply?: (arrival: Arrival) => Reply) => {
    const r = await startLocalReceiver(reply);
    closers.push(r.close);
    return r;
  };
  const send = async (api: Stack["api"], eventType = "message.sent") => {
    const res = await api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType) });
    expect(res.status).toBe(201);
    return res.body.event_id as string;
  };
  const eventStatus = async (api: Stack["api"], id: string) => (await api("GET", `/v1/events/${id}`)).body.status as string;
  const createListen = async (api: Stack["api"], events = ["message.sent"]) => {
    const created = await api("POST", "/v1/webhooks", { url: null, mode: "listen", events });
    expect(created.status).toBe(201);
    return created.body as { id: string; secret: string };
  };

  test("creates a listen webhook, forwards signed deliveries with the receiver's status in the log, and resumes with --webhook after SIGTERM, oldest first, each once", async () => {
    const account = await stack.newAccount();
    const statuses = [200, 201, 202];
    let n = 0;
    const local = await receiver((a) => (a.kind === "webhook.test" ? 204 : statuses[n++ % 3]));
    const first = listen(["--forward-to", local.url, "--events", "message.sent"], account.apiKey);
    await waitForOutput(first, /secret whsec_\S+/);
    const webhookId = /created listen webhook (wh_\S+)/.exec(first.stdout())![1];
    const secret = /secret (whsec_\S+)/.exec(first.stdout())![1];

    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await send(account.api));
    await waitUntil(
      () => local.events().length,
      (count) => count >= 3,
    );
    expect(local.events().map((a) => a.eventId)).toEqual(ids);
    for (const a of local.arrivals) expect(verify(secret, a.headers, a.body).event).toBe(a.kind);
    expect(local.arrivals[0].kind).toBe("webhook.test");
    for (const [i, id] of ids.entries()) {
      await waitUntil(
        () => eventStatus(account.api, id),
        (s) => s === "delivered",
      );
      const rows = await deliveryRows(account, { event_id: id });
      expect(rows.map((r) => [r.webhook_id, r.response_status, r.response_body])).toEqual([
        [webhookId, statuses[i], `answered ${statuses[i]}`],
      ]);
      await waitForOutput(first, new RegExp(`message\\.sent ${id} ${statuses[i]} \\d+ ms\\n`));
    }

    first.child.kill("SIGTERM");
    const stopped = await waitForExit(first, 10_000);
    expect(stopped.code).toBe(0);

    const later: string[] = [];
    for (let i = 0; i < 5; i++) later.push(await send(account.api));
    n = 0;
    const second = listen(["--forward-to", local.url, "--webhook", webhookId], account.apiKey);
    await waitUntil(
      () => local.events().length,
      (count) => count >= 8,
    );
    for (const id of later)
      await waitUntil(
        () => eventStatus(account.api, id),
        (s) => s === "delivered",
      );
    expect(
      local
        .events()
        .slice(3)
        .map((a) => a.eventId),
    ).toEqual(later);
    expect(second.stdout()).not.toContain("created listen webhook");
    // Nothing more comes: each arrived once.
    await expect(
      waitUntil(
        () => local.events().length,
        (count) => count > 8,
        1_000,
      ),
    ).rejects.toThrow(TIMED_OUT);
    expect(local.events()).toHaveLength(8);
  }, 90_000);

  test("a 500 of the receiver is retried on the schedule and then delivered", async () => {
    const account = await stack.newAccount();
    const hook = await createListen(account.api);
    const failed = new Set<string>();
    const local = await receiver((a) => {
      if (a.kind === "webhook.test" || failed.has(a.eventId)) return 200;
      failed.add(a.eventId);
      return 500;
    });
    const cli = listen(["--forward-to", local.url, "--webhook", hook.id], account.apiKey);
    const id = await send(account.api);
    await waitUntil(
      () => eventStatus(account.api, id),
      (s) => s === "delivered",
    );
    const rows = await deliveryRows(account, { event_id: id });
    expect(rows.map((r) => [r.trigger, r.attempt, r.response_status])).toEqual([
      ["initial", 0, 500],
      ["retry", 1, 200],
    ]);
    expect(local.events().map((a) => a.eventId)).toEqual([id, id]);
    await waitForOutput(cli, new RegExp(`message\\.sent ${id} \\(retry 1\\) 200 \\d+ ms`));
  }, 30_000);

  test("a receiver that is not listening is answered connection_error, and the event is retried until it fails", async () => {
    const account = await stack.newAccount();
    const hook = await createListen(account.api);
    const cli = listen(["--forward-to", `http://127.0.0.1:${await freePort()}/hooks`, "--webhook", hook.id], account.apiKey);
    const id = await send(account.api);
    await waitUntil(
      () => eventStatus(account.api, id),
      (s) => s === "failed",
    );
    const rows = await deliveryRows(account, { event_id: id });
    expect(rows.map((r) => [r.attempt, r.response_status, r.error])).toEqual([0, 1, 2, 3].map((n) => [n, null, "connection_error"]));
    await waitForOutput(cli, new RegExp(`message\\.sent ${id} connection_error \\(ECONNREFUSED\\) \\d+ ms`));
  }, 30_000);

  test("a webhook the API does not hand out (unknown, or a push webhook's) stops it with exit 1 and the API's reason", async () => {
    const account = await stack.newAccount();
    const push = await account.api("POST", "/v1/webhooks", { url: "https://127.0.0.1:9/h", events: ["message.sent"] });
    const unknown = listen(["--forward-to", "http://127.0.0.1:9/hooks", "--webhook", `wh_${"0".repeat(32)}`], account.apiKey);
    const pushed = listen(["--forward-to", "http://127.0.0.1:9/hooks", "--webhook", push.body.id as string], account.apiKey);
    expect((await waitForExit(unknown, 60_000)).code).toBe(1);
    expect((await waitForExit(pushed, 60_000)).code).toBe(1);
    expect(unknown.output()).toContain("404 not_found");
    expect(pushed.output()).toContain("409 conflict");
  }, 90_000);

  test("stopped (Ctrl-C) or killed while the receiver holds a request, it answers nothing; the item is handed out again after 60 s", async () => {
    const account = await stack.newAccount();
    const [stoppedHook, killedHook] = [await createListen(account.api), await createListen(account.api, ["message.opened"])];
    let holding = true;
    const local = await receiver((a) => (a.kind !== "webhook.test" && holding ? "hold" : 200));
    const stoppedCli = listen(["--forward-to", local.url, "--webhook", stoppedHook.id], account.apiKey);
    const killedCli = listen(["--forward-to", local.url, "--webhook", killedHook.id], account.apiKey);
    const [sent, opened] = [await send(account.api, "message.sent"), await send(account.api, "message.opened")];
    await waitUntil(
      () => local.events().map((a) => a.eventId),
      (got) => got.includes(sent) && got.includes(opened),
    );
    stoppedCli.child.kill("SIGINT");
    killedCli.child.kill("SIGKILL");
    // Promptly: the forward in flight gets 3 s, then is abandoned.
    const exit = await waitForExit(stoppedCli, 10_000);
    expect(exit.code).toBe(0);
    expect(stoppedCli.stdout()).toContain("left unanswered");
    expect((await waitForExit(killedCli, 5_000)).signal).toBe("SIGKILL");
    // No half answer: neither has a delivery row.
    expect(await deliveryRows(account, { event_id: sent })).toEqual([]);
    expect(await deliveryRows(account, { event_id: opened })).toEqual([]);

    holding = false;
    listen(["--forward-to", local.url, "--webhook", stoppedHook.id], account.apiKey);
    listen(["--forward-to", local.url, "--webhook", killedHook.id], account.apiKey);
    // Not before the first pull's 60 s have passed: both are still held by it.
    await expect(
      waitUntil(
        () => local.events().length,
        (count) => count > 2,
        5_000,
      ),
    ).rejects.toThrow(TIMED_OUT);
    for (const id of [sent, opened])
      await waitUntil(
        () => eventStatus(account.api, id),
        (s) => s === "delivered",
        80_000,
        200,
      );
    for (const id of [sent, opened]) {
      expect(local.events().filter((a) => a.eventId === id)).toHaveLength(2);
      expect((await deliveryRows(account, { event_id: id })).map((r) => r.response_status)).toEqual([200]);
    }
  }, 120_000);

  test("keeps going through an API that is not there yet and one that goes away and comes back", async () => {
    const account = await stack.newAccount();
    const hook = await createListen(account.api);
    const local = await receiver();
    // A TCP relay to the API on a port of its own: closing it is the API going away for the CLI.
    const port = await freePort();
    const target = new URL(stack.baseUrl);
    const sockets = new Set<net.Socket>();
    let relay: net.Server | null = null;
    const openRelay = () =>
      new Promise<void>((resolve) => {
        relay = net.createServer((client) => {
          const upstream = net.connect(Number(target.port), target.hostname);
          for (const s of [client, upstream]) {
            sockets.add(s);
            s.on("close", () => sockets.delete(s));
            s.on("error", () => undefined);
          }
          client.pipe(upstream).pipe(client);
        });
        relay.listen(port, "127.0.0.1", resolve);
      });
    const closeRelay = async () => {
      const closing = new Promise((resolve) => relay?.close(resolve));
      for (const s of sockets) s.destroy();
      await closing;
      relay = null;
    };
    closers.push(async () => relay && closeRelay());

    const cli = listen(["--forward-to", local.url, "--webhook", hook.id], account.apiKey, `http://127.0.0.1:${port}`);
    await waitForOutput(cli, /did not answer the pull .*trying again in/);
    await openRelay();
    const before = await send(account.api);
    await waitUntil(
      () => eventStatus(account.api, before),
      (s) => s === "delivered",
    );
    await waitForOutput(cli, "the API answers again");

    await closeRelay();
    const during = await send(account.api);
    await waitUntil(
      () => (cli.output().match(/did not answer the pull/g) ?? []).length,
      (count) => count >= 2,
    );
    await openRelay();
    await waitUntil(
      () => eventStatus(account.api, during),
      (s) => s === "delivered",
      30_000,
    );
    expect(cli.running()).toBe(true);
    expect(local.events().map((a) => a.eventId)).toEqual([before, during]);
  }, 60_000);

  test("--help names every option with an example; a bad option or a forward URL off this machine is a usage error (exit 2)", async () => {
    const help = listen(["--help"], "");
    expect((await waitForExit(help, 60_000)).code).toBe(0);
    for (const option of ["--forward-to", "--webhook", "--events", "--inbox", "--api", "--key", "--allow-external", "--help"])
      expect(help.stdout()).toContain(option);
    expect(help.stdout()).toMatch(/\nExamples:\n {2}\$ .*npm run -s listen -- --forward-to http:\/\/localhost/);

    const bogus = listen(["--forward-to", "http://127.0.0.1:9/hooks", "--bogus"], "whk_x");
    const external = listen(["--forward-to", "https://example.com/hooks"], "whk_x");
    const both = listen(["--forward-to", "http://localhost:9/hooks", "--webhook", "wh_x", "--events", "message.sent"], "whk_x");
    for (const p of [bogus, external, both]) expect((await waitForExit(p, 60_000)).code).toBe(2);
    expect(bogus.output()).toContain("unknown option '--bogus'");
    expect(external.output()).toContain("--allow-external");
    expect(external.output()).toMatch(/\nUsage: /);
  }, 90_000);
});
