-- Whether a replay was asked for with a target_url (CONTRACT.md section 7). A replay without one
-- is cancelled when its webhook is disabled or deleted before the attempt; one with a target_url
-- is sent whatever its webhook's status, even when the target_url is the webhook's own URL.
-- Rows from before: decided by the URL, as then (a replay to the webhook's own URL had no
-- target_url, or one equal to it).
ALTER TABLE "replays" ADD COLUMN "has_target_url" BOOLEAN NOT NULL DEFAULT false;
UPDATE "replays" SET "has_target_url" = NOT "to_own_url";
