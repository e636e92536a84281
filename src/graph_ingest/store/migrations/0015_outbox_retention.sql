-- Published outbox rows were kept forever: every plan's four operation events, values included,
-- so the table grew with every plan ever ingested. The active relay now deletes the rows
-- published longer ago than relay.published_retention_s, oldest first, a bounded number per
-- statement. This index finds them without walking the rows still within the retention.
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
