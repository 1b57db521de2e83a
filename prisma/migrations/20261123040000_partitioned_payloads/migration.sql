-- Payloads move to a table partitioned by day (UTC) on the event's created_at, so that retention
-- is dropping whole partitions (no row is updated, whatever the volume) while the event's
-- metadata, its deliveries and its audit entries stay (spec "Event record"). The horizon below
-- which every payload is gone is kept in retention_state; `payload_retained` follows from it.

-- CreateTable
CREATE TABLE "event_payloads" (
    "event_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "payload" TEXT NOT NULL,

    CONSTRAINT "event_payloads_pkey" PRIMARY KEY ("event_id", "created_at")
) PARTITION BY RANGE ("created_at");

-- CreateTable
CREATE TABLE "retention_state" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "payloads_purged_before" TIMESTAMPTZ(3) NOT NULL DEFAULT '1970-01-01 00:00:00+00',

    CONSTRAINT "retention_state_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "retention_state_single_row" CHECK ("id" = 1)
);
INSERT INTO "retention_state" ("id") VALUES (1);

-- The partitions of the days [from_day, to_day), named event_payloads_YYYYMMDD; existing ones
-- are left alone. Returns how many were created. Called by the maintenance job (days ahead) and
-- by ingest when a row finds no partition.
CREATE FUNCTION "ensure_event_payload_partitions"(from_day date, to_day date) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    day date := from_day;
    made integer := 0;
    name text;
BEGIN
    WHILE day < to_day LOOP
        name := 'event_payloads_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF "event_payloads" FOR VALUES FROM (%L) TO (%L)',
                           name, (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
            made := made + 1;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN made;
END;
$$;

-- Existing payloads move over (partitions from the oldest kept payload to two weeks ahead).
SELECT "ensure_event_payload_partitions"(
    coalesce((SELECT min(("created_at" AT TIME ZONE 'UTC')::date) FROM "events" WHERE "payload" IS NOT NULL), (now() AT TIME ZONE 'UTC')::date),
    (now() AT TIME ZONE 'UTC')::date + 15);
INSERT INTO "event_payloads" ("event_id", "created_at", "payload")
SELECT "id", "created_at", "payload" FROM "events" WHERE "payload" IS NOT NULL;
-- Payloads purged before this migration: the horizon passes them.
UPDATE "retention_state" SET "payloads_purged_before" = coalesce(
    (SELECT max("created_at") + interval '1 millisecond' FROM "events" WHERE "payload" IS NULL AND "payload_purged_at" IS NOT NULL),
    '1970-01-01 00:00:00+00');

-- AlterTable
ALTER TABLE "events" DROP COLUMN "payload",
DROP COLUMN "payload_purged_at";
