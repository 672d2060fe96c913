-- Version 12. files.unmarked: a claim of the row ended without a done
-- outcome (its host died or was cut off past its lease, or let it go: a
-- stop, a DST that failed its barrier), so a copy of it may lie in DST,
-- renamed into place and not marked, its metadata perhaps lost in a power
-- cut. Rule 9 takes such an entry for ferry's (src/copy_dst.c,
-- ferry_copy_is_ours: written since the job began) for these rows only; a
-- user's file that appears in DST while a job runs is not taken for
-- ferry's. A claim sets it when the row's lease ran out, a release when it
-- lets a pending row go; a done outcome clears it.
--
-- Rows of before: pending, and claimed once (a token), may be such rows
-- (not a failed one: its host recorded its outcome, and a refusal of
-- rule 9 must stay one).
ALTER TABLE files ADD COLUMN unmarked boolean NOT NULL DEFAULT false;
UPDATE files SET unmarked = true WHERE state = 0 AND claim_token IS NOT NULL;
