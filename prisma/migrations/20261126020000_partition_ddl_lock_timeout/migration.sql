-- Making a payload partition never queues behind a reader of event_payloads (issue 17: a long
-- reader, such as a nightly pg_dump or an analyst's query, made `CREATE TABLE ... PARTITION OF`
-- wait for its ACCESS EXCLUSIVE lock on event_payloads, and every payload insert and read queued
-- behind that waiting lock).
--
-- A partition is now made as a table of its own, then attached: ATTACH PARTITION takes only
-- SHARE UPDATE EXCLUSIVE on event_payloads, which neither readers (ACCESS SHARE) nor inserts
-- (ROW EXCLUSIVE) conflict with, so it waits for neither and holds up neither. It does conflict
-- with other DDL of the table (another ATTACH, a DETACH in progress, ANALYZE): `lock_timeout`
-- bounds that wait to 1 s, after which the call fails with lock_not_available (55P03) and its
-- caller tries again later (the maintenance job on its next run, two weeks ahead of need; ingest
-- answers that one request with an error instead of hanging).
CREATE OR REPLACE FUNCTION "ensure_event_payload_partitions"(from_day date, to_day date) RETURNS integer LANGUAGE plpgsql
SET lock_timeout = '1s' AS $$
DECLARE
    day date := from_day;
    made integer := 0;
    name text;
BEGIN
    WHILE day < to_day LOOP
        name := 'event_payloads_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            BEGIN
                -- INCLUDING ALL copies the primary key, which ATTACH then adopts as the partition's index.
                EXECUTE format('CREATE TABLE %I (LIKE "event_payloads" INCLUDING ALL)', name);
                EXECUTE format('ALTER TABLE "event_payloads" ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                               name, (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
                made := made + 1;
            EXCEPTION WHEN duplicate_table OR unique_violation THEN
                -- Another session made this day's partition at the same time: it exists.
                NULL;
            END;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN made;
END;
$$;
