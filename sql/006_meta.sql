-- ferry manifest, schema version 6: metadata is its own layer.
--
-- What ferry applied to each DST entry, so that a change of metadata
-- alone is applied in place (no data moves) and a later run with other
-- options makes up what an earlier one left out:
--   rdev       a device's number (files.type 3 with a device mode)
--   nlink      SRC's link count when the row was last copied or applied
--   xdigest    XXH3-64 of SRC's xattrs and ACLs as applied (the names
--              and values, sorted; ACLs included only when applied);
--              (as a signed 64-bit integer); NULL: none read yet
--   applied    the MF_AP_* bits (src/manifest_types.h) of the metadata
--              ferry applied to the DST entry: the options in force then,
--              less what DST could not hold. 0 for rows of an older
--              ferry, which kept no xattrs or ACLs: their metadata is
--              applied once more, no data moves
--   need       what a pending row needs: 0 its data (a copy or a link),
--              1 its metadata only (MF_NEED_*)
--   meta_step, meta_errno
--              a done row whose data arrived but whose metadata fell
--              short: the step (enum ferry_step) and errno; 0 none
ALTER TABLE files ADD COLUMN rdev INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN nlink INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN xdigest INTEGER;
ALTER TABLE files ADD COLUMN applied INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN need INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN meta_step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN meta_errno INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dirs ADD COLUMN xdigest INTEGER;
ALTER TABLE dirs ADD COLUMN applied INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dirs ADD COLUMN meta_step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dirs ADD COLUMN meta_errno INTEGER NOT NULL DEFAULT 0;
