-- DropIndex: superseded by the (account_id, created_at, id) keyset index of the events list.
DROP INDEX "events_account_id_id_idx";

-- DropIndex: the deliveries log pages by (created_at, id) too.
DROP INDEX "deliveries_account_id_id_idx";

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN "replay_id" TEXT;

-- CreateTable
CREATE TABLE "replays" (
    "id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "destination_id" TEXT NOT NULL,
    "destination_url" TEXT NOT NULL,
    "to_own_url" BOOLEAN NOT NULL,
    "api_key_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "replays_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "audit_entries" (
    "id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "replay_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "replayed_at" TIMESTAMPTZ(3) NOT NULL,
    "destination_url" TEXT NOT NULL,
    "response_status" INTEGER,
    "error" TEXT,
    "api_key_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "audit_entries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "events_account_id_created_at_id_idx" ON "events"("account_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "events_account_id_inbox_id_created_at_id_idx" ON "events"("account_id", "inbox_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "events_account_id_event_type_created_at_id_idx" ON "events"("account_id", "event_type", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "events_account_id_status_created_at_id_idx" ON "events"("account_id", "status", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "events_created_at_idx" ON "events"("created_at");

-- CreateIndex
CREATE INDEX "deliveries_account_id_created_at_id_idx" ON "deliveries"("account_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_replay_id_key" ON "deliveries"("replay_id");

-- CreateIndex
CREATE INDEX "replays_event_id_idx" ON "replays"("event_id");

-- CreateIndex
CREATE UNIQUE INDEX "audit_entries_replay_id_key" ON "audit_entries"("replay_id");

-- CreateIndex
CREATE INDEX "audit_entries_account_id_replayed_at_id_idx" ON "audit_entries"("account_id", "replayed_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "audit_entries_account_id_event_id_replayed_at_idx" ON "audit_entries"("account_id", "event_id", "replayed_at" DESC);

-- The audit log is append-only: nothing may change or remove an entry, whatever the client.
CREATE FUNCTION "audit_entries_append_only"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_entries is append-only (% refused)', TG_OP;
END;
$$;

CREATE TRIGGER "audit_entries_append_only"
    BEFORE UPDATE OR DELETE ON "audit_entries"
    FOR EACH ROW EXECUTE FUNCTION "audit_entries_append_only"();
CREATE TRIGGER "audit_entries_no_truncate"
    BEFORE TRUNCATE ON "audit_entries"
    FOR EACH STATEMENT EXECUTE FUNCTION "audit_entries_append_only"();
