-- migrate: outside a transaction
-- Published outbox rows were kept forever: every plan's four operation events, values included,
-- so the table grew with every plan ever ingested. The active relay now deletes the rows
-- published longer ago than relay.published_retention_s, oldest first, a bounded number per
-- statement. This index finds them without walking the rows still within the retention.
-- CONCURRENTLY: an outbox upgraded to this holds every row ever published, and a plain CREATE
-- INDEX would block every worker's outbox writes until the build ends. A build that failed part
-- way leaves an invalid index of this name: the DROP clears it when the migration runs again.
DROP INDEX CONCURRENTLY IF EXISTS outbox_published_idx;
CREATE INDEX CONCURRENTLY outbox_published_idx ON outbox (published_at)
    WHERE published_at IS NOT NULL;
