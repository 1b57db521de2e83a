/** PostgreSQL access shared by the API and the dispatcher: the Prisma client, ids, migrations. */
export {
  createConfiguredDatabase,
  createDatabase,
  createPool,
  createPrismaClient,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  prismaOnPool,
} from "./client.js";
export type { Database, DatabaseConfig, PoolSettings, PrismaClient } from "./client.js";
export { Prisma } from "./generated/prisma/client.js";
export type {
  Webhook,
  Event,
  Destination,
  Delivery,
  ApiKey,
  Account,
  Replay,
  TestDelivery,
  AuditEntry,
} from "./generated/prisma/client.js";
export { DeliveryStatus, DeliveryTrigger, WebhookStatus } from "./generated/prisma/enums.js";
export { newId } from "./ids.js";
export type { IdPrefix } from "./ids.js";
export { migrate, ensureDatabase, migrationChecksum, listMigrations, MIGRATIONS_DIR } from "./migrate.js";
export { startListener } from "./listener.js";
export type { ListenerOptions } from "./listener.js";
