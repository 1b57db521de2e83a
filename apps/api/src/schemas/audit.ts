import { z } from "zod";
import { prefixedId, timestamp } from "./common.js";
import { eventId } from "./events.js";

/** An audit log entry (spec "Audit log entry"; docs/api.md, "Audit log"): one per replay attempt. */
export const auditEntrySchema = z
  .object({
    id: prefixedId("aud", "audit entry id"),
    event_id: eventId.meta({ description: "the event that was replayed" }),
    replayed_at: timestamp.meta({ description: "when the replay happened" }),
    destination_url: z
      .string()
      .nullable()
      .meta({ description: "the webhook's URL or the override target_url; null for a replay pulled by a listen webhook" }),
    response_status: z.number().int().nullable().meta({ description: "the receiver's status, or null when none was received" }),
    error: z.string().nullable().meta({
      description:
        "as in the deliveries log; 'cancelled' (with response_status null) for a replay without target_url whose webhook was disabled or deleted before its attempt, which then sent nothing",
    }),
    api_key_id: prefixedId("key", "the API key that requested the replay"),
  })
  .meta({ id: "AuditEntry" });
export type AuditEntryView = z.infer<typeof auditEntrySchema>;
