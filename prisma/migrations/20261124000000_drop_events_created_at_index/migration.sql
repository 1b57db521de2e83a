-- events(created_at) served no query of its own once payload retention became a partition drop,
-- and it misled the planner: on a grown database it walked this index newest first for an
-- account's first page, filtering out every newer event of the other accounts (26 ms and 22,000
-- buffers for 50 rows, bench --grown), where (account_id, created_at DESC, id DESC) reads 7.
DROP INDEX "events_created_at_idx";
