import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { postRawMessage, type ApiClient, type Schemas } from "@mailhooks/api-client";
import { getEvent } from "./read-back.js";

/**
 * The demo's input (scripts/demo/main.ts): real RFC 5322 messages from a folder, through
 * POST /v1/inboxes/{id}/messages, then the other five kinds of events about one reply, through
 * POST /v1/events.
 */

/** What the first message.received said, for the reply's events. */
export interface FirstReceived {
  messageId: string;
  threadId: string;
  from: string;
  to: string[];
  subject: string;
}

/**
 * Feeds every .eml file of `mailDir`, in the order of their names: every third to `otherInbox`,
 * the rest to `inbox`. A message the API refuses is logged and skipped.
 * @returns the accepted events' ids, and what the first message.received said (null: none was)
 * @throws Error when `mailDir` holds no .eml file
 */
export async function feedMail(
  api: ApiClient,
  mailDir: string,
  [inbox, otherInbox]: readonly [string, string],
  log: (line: string) => void,
): Promise<{ eventIds: string[]; firstReceived: FirstReceived | null }> {
  const files = (await readdir(mailDir)).filter((f) => f.endsWith(".eml")).sort();
  if (files.length === 0) throw new Error(`no .eml files in ${mailDir}`);
  const eventIds: string[] = [];
  let firstReceived: FirstReceived | null = null;
  for (const [i, file] of files.entries()) {
    const raw = await readFile(path.join(mailDir, file));
    const to = i % 3 === 2 ? otherInbox : inbox;
    const { data: accepted, error, response } = await postRawMessage(api, to, raw);
    if (!accepted) {
      log(`${file}: ${response.status} ${error?.error.message ?? ""} (skipped)`);
      continue;
    }
    eventIds.push(accepted.event_id);
    log(`${file} -> ${to}: ${accepted.event_type} ${accepted.event_id}`);
    if (!firstReceived && accepted.event_type === "message.received") {
      const { payload } = await getEvent(api, accepted.event_id);
      if (payload?.event === "message.received") {
        const d = payload.data;
        firstReceived = { messageId: d.messageId, threadId: d.threadId, from: d.from, to: d.to, subject: d.subject };
      }
    }
  }
  return { eventIds, firstReceived };
}

/**
 * The other five kinds, as the email platform would publish them about one reply from `inbox` to
 * `firstReceived` (made-up values when there was none): sent, delivered, opened, clicked, and a
 * hard bounce of a copy to an unknown address, one second apart.
 */
export function replyEvents(inbox: string, firstReceived: FirstReceived | null): Schemas["EventInput"][] {
  const outgoing = {
    messageId: `<${randomUUID()}@inbox.example.net>`,
    threadId: firstReceived?.threadId ?? "thr_demo",
    inboxId: inbox,
    from: inbox,
    to: [firstReceived?.from ?? "alice@example.com"],
    subject: `Re: ${firstReceived?.subject ?? "hello"}`,
  };
  const at = (offsetS: number) => new Date(Date.now() + offsetS * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  return [
    { event_type: "message.sent", data: { ...outgoing, status: "sent" } },
    { event_type: "message.delivered", data: { ...outgoing, status: "delivered", deliveredAt: at(1) } },
    { event_type: "message.opened", data: { ...outgoing, openCount: 1, openedAt: at(2) } },
    { event_type: "message.clicked", data: { ...outgoing, url: "https://example.com/pricing", clickCount: 1, clickedAt: at(3) } },
    {
      event_type: "message.bounced",
      data: {
        ...outgoing,
        to: ["nobody@example.org"],
        bounceType: "hard",
        bounceCode: "5.1.1",
        bounceMessage: "550 5.1.1 User unknown",
        bouncedAt: at(4),
      },
    },
  ];
}
