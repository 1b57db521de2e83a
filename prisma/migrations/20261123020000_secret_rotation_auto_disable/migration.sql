-- Secret rotation, auto-disable (CONTRACT.md section 4). `secret` and `previous_secret` hold
-- AES-256-GCM ciphertexts (packages/secrets); rows written before encryption hold plaintext until
-- `npm run -s keys -- reencrypt-secrets` rewrites them.

-- CreateEnum
CREATE TYPE "DisabledReason" AS ENUM ('manual', 'failing');

-- AlterTable
ALTER TABLE "webhooks" ADD COLUMN "previous_secret" TEXT,
ADD COLUMN "secret_activates_at" TIMESTAMPTZ(3),
ADD COLUMN "disabled_reason" "DisabledReason",
ADD COLUMN "failing_since" TIMESTAMPTZ(3),
ADD COLUMN "failing_events" INTEGER NOT NULL DEFAULT 0;

-- Webhooks disabled before this migration were disabled by a person.
UPDATE "webhooks" SET "disabled_reason" = 'manual' WHERE "status" = 'disabled' AND "deleted_at" IS NULL;
