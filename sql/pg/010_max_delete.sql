-- Version 10. --max-delete in a shared job (src/shared/delete.c,
-- src/manifest_pg/del_limit.c): at most N entries deleted by a scan
-- generation's --delete, whichever hosts delete them.
--
-- jobs.del_limit: the limit of generation del_gen, as its first host run
--   with --delete gave it (-1: none). Every host that deletes in one gen
--   has it: a host with another is refused until the gen is over.
-- jobs.del_used: entries of del_gen deleted, or held by a host about to
--   delete them: a host takes a share of what is left before it deletes
--   (never more than the limit in all) and gives back, in the transaction
--   of its outcomes, what it did not delete. A share of a host that died
--   stays taken: that gen deletes fewer, never more.
-- jobs.del_held: entries of del_gen kept because the limit was reached;
--   their rows stay removed, and the next gen's --delete tries them again.
ALTER TABLE jobs ADD COLUMN del_gen bigint;
ALTER TABLE jobs ADD COLUMN del_limit bigint;
ALTER TABLE jobs ADD COLUMN del_used bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN del_held bigint NOT NULL DEFAULT 0;
