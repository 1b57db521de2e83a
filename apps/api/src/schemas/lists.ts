import { auditEntrySchema } from "./audit.js";
import { pageOf } from "./common.js";
import { deliverySchema } from "./deliveries.js";
import { eventListItemSchema } from "./events.js";
import { webhookSchema } from "./webhooks.js";

/** The pages of the four lists (docs/api.md, "Conventions"): `{data, next_cursor}`, newest first. */
export const webhookListSchema = pageOf(webhookSchema, "WebhookList");
export const eventListSchema = pageOf(eventListItemSchema, "EventList");
export const deliveryListSchema = pageOf(deliverySchema, "DeliveryList");
export const auditLogSchema = pageOf(auditEntrySchema, "AuditLog");
