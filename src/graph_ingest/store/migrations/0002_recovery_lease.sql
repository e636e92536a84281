-- 0002: recovery leases (`graph-ingest recover`, DESIGN.md §5 "Resume / recovery").
-- A recoverer claims a stranded operation by setting its lease; while the lease runs, no other
-- recoverer takes it. These columns are bookkeeping of the recoverers only: the apply algorithm
-- neither reads nor writes them, and they are not part of the operation's event.
ALTER TABLE operations
    ADD COLUMN recovery_claimed_by   TEXT,
    ADD COLUMN recovery_lease_until  TIMESTAMPTZ,
    ADD COLUMN recovery_claims       INT NOT NULL DEFAULT 0 CHECK (recovery_claims >= 0);
