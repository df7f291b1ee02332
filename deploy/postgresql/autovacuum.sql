-- Per-table autovacuum settings for the tables CounterService writes under like/unlike churn,
-- with deploy/postgresql/counterservice.conf's autovacuum_naptime = 10s. Run once (psql -f), by
-- the owner of the tables; the node does not change the app's tables' storage settings itself.
-- Measured figures: deploy/CONFIGURATION.md, "PostgreSQL".

-- A toggle inserts a likes row or deletes one: vacuum after 1 % of the rows died (not 20 %), after
-- 5 % were inserted, and let the vacuum work ten times faster than the default cost limit.
ALTER TABLE likes SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_limit = 2000
);

-- Every flush updates likes_count of the posts it touched. likes_count is in no index, so the
-- update can stay on its page (a HOT update) when the page has room: fillfactor 90 leaves it
-- (for pages written from now on; VACUUM FULL or pg_repack applies it to existing ones).
ALTER TABLE posts SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_cost_limit = 2000,
    fillfactor = 90
);
