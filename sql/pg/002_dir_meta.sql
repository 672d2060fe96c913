-- Version 2. The directory metadata pass of a shared job (src/shared/finish.c): once
-- the job's scan and copies are over, listed directories whose state is 0
-- are claimed (claim_token, lease_until, claimed_by again) and given their
-- mode, owner and times in DST; state becomes 1 (applied) or 2 (failed,
-- meta_error says why; a host's next start makes it 0 again).
ALTER TABLE dirs ADD COLUMN meta_error text;
CREATE INDEX dirs_to_apply ON dirs (job, id) WHERE state = 0;
-- A device file's number (what the copy makes it with); 0 for the rest.
ALTER TABLE files ADD COLUMN rdev bigint NOT NULL DEFAULT 0;
