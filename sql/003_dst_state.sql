-- ferry manifest, schema version 3: what ferry left in DST.
--
-- The scan overwrites a row's type, size and mtime_ns with SRC's new
-- values, so they cannot tell what DST holds under that name. These
-- columns record the entry ferry last put in DST for the row: its type,
-- size and mtime as DST reported them once the copy was in place. NULL
-- until ferry has put something there. ferry replaces or removes a DST
-- entry only when it still matches them (DESIGN.md, rule 9).
ALTER TABLE files ADD COLUMN dst_type INTEGER;
ALTER TABLE files ADD COLUMN dst_size INTEGER;
ALTER TABLE files ADD COLUMN dst_mtime_ns INTEGER;

-- Rows copied by an older version: DST got SRC's size and mtime then.
UPDATE files SET dst_type = type, dst_size = size, dst_mtime_ns = mtime_ns
 WHERE state = 1;
