import { z } from "zod";
import { isMailbox, MAX_ADDRESS_LENGTH } from "./addresses.js";
import { ENVELOPE_MAX_BYTES, type EventType } from "./kinds.js";

/**
 * zod schemas of the envelope `data` of each event kind, built from the specification's
 * tables "data fields common to all six event kinds" and "Additional data fields per event
 * kind". Field order in every shape is the specification's order; `buildEnvelope` relies on
 * it. Objects are strict: an unknown field is a validation error, not silently dropped.
 */

/** An ISO 8601 UTC timestamp such as `2026-11-22T10:00:00Z` (fractional seconds allowed). */
export const isoUtcTimestamp = z.iso.datetime({ offset: false, message: "must be an ISO 8601 UTC timestamp" });

const ADDRESS_MESSAGE = "must be one RFC 5322 address, such as alice@example.com or Alice Example <alice@example.com>";

/** One RFC 5322 mailbox, bare or with a display name (see isMailbox); kept as written. */
export const address = z.string().max(MAX_ADDRESS_LENGTH).refine(isMailbox, ADDRESS_MESSAGE);

/**
 * A list of addresses. Only the first invalid one is reported: parsing an uncommon address
 * costs up to milliseconds, and a request full of them must not cost seconds.
 */
export const addressList = z
  .array(z.string().max(MAX_ADDRESS_LENGTH))
  .max(1000)
  .superRefine((list, ctx) => {
    const index = list.findIndex((entry) => !isMailbox(entry));
    if (index >= 0) ctx.addIssue({ code: "custom", path: [index], message: ADDRESS_MESSAGE, input: list[index] });
  });

const nonEmpty = z.string().min(1).max(998);
const count = z.number().int().nonnegative();

export const commonDataShape = {
  messageId: nonEmpty,
  threadId: nonEmpty,
  inboxId: z.string().min(1).max(200),
  from: address,
  to: addressList,
  subject: z.string().max(998),
} as const;

export const messageSentData = z.strictObject({
  ...commonDataShape,
  status: z.literal("sent"),
});

export const messageDeliveredData = z.strictObject({
  ...commonDataShape,
  status: z.literal("delivered"),
  deliveredAt: isoUtcTimestamp,
});

export const messageOpenedData = z.strictObject({
  ...commonDataShape,
  openCount: count,
  openedAt: isoUtcTimestamp,
});

export const messageClickedData = z.strictObject({
  ...commonDataShape,
  url: z.string().min(1).max(8192),
  clickCount: count,
  clickedAt: isoUtcTimestamp,
});

export const receivedHeaders = z.strictObject({
  messageId: z.string().max(998),
  inReplyTo: z.string().max(998),
  references: z.string().max(65536),
});

export const messageReceivedData = z.strictObject({
  ...commonDataShape,
  // Bounded by the envelope it travels in: each character takes at least one byte of it (the
  // envelope's own bound, checked by ingest on the serialized size, is the one that binds).
  body: z.string().max(ENVELOPE_MAX_BYTES, `must be at most ${ENVELOPE_MAX_BYTES} characters`),
  headers: receivedHeaders,
});

export const messageBouncedData = z.strictObject({
  ...commonDataShape,
  // A DSN does not always carry the bounced message's sender.
  from: address.or(z.literal("")),
  bounceType: z.string().min(1).max(50),
  bounceCode: z.string().min(1).max(50),
  bounceMessage: z.string().max(8192),
  bouncedAt: isoUtcTimestamp,
});

export const eventDataSchemas = {
  "message.sent": messageSentData,
  "message.delivered": messageDeliveredData,
  "message.opened": messageOpenedData,
  "message.clicked": messageClickedData,
  "message.received": messageReceivedData,
  "message.bounced": messageBouncedData,
} as const satisfies Record<EventType, z.ZodType>;

export type EventData<K extends EventType = EventType> = z.infer<(typeof eventDataSchemas)[K]>;
export type ReceivedData = z.infer<typeof messageReceivedData>;
export type BouncedData = z.infer<typeof messageBouncedData>;
