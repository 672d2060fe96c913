-- ferry manifest, schema version 7: access times, with --atimes.
--
--   atime_ns   SRC's access time as applied to the DST entry by a run
--              with --atimes (same encoding as mtime_ns); NULL: not
--              tracked (a run without --atimes sets atimes when it copies
--              but does not look for a change of one alone). A run with
--              --atimes applies a changed one in place (no data moves).
ALTER TABLE files ADD COLUMN atime_ns;
