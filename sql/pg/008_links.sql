-- Version 8. Hard links in a shared job (src/shared/scan.c, claims.c):
-- the names of one SRC inode are one file in DST, as on a single host.
--
-- files.nlink: the link count the listing saw (NULL: a row of an older
--   version).
-- files.lgroup: the inode number, as the listing host's mount numbers it,
--   of a file or special file (as cp -a and rsync -H link them) with more
--   than one name on SRC's own file system
--   (a mount below SRC keeps its names apart); NULL for every other row
--   and with --no-hard-links. A link group of gen g is the rows of g with
--   one lgroup, size and mtime_ns.
-- files.lwait: a pending row of a link group that no claim may take yet
--   (a row that becomes pending with an lgroup waits). Rows are let go by
--   manifest_pg/links.c once the scan of g is over (no directory left to
--   list), when a host finds nothing to claim, and for the groups of a
--   claim's outcome: a group with a row done in g lets all go (claimed as
--   links to the lowest done row's copy); a group with none lets its
--   lowest waiting row go, unless a row of it is pending and let go
--   already (its data is being copied), so one row is copied and the
--   others follow it (or, when it failed, the next is copied). A host
--   links a name only when SRC's name of the row it links to is the same
--   inode on its own mount (copy_link.c), so another host's numbering
--   never decides it alone.
-- A row listed again whose ctime moved while its link count moved too
--   and its inode number stayed (a name added or removed: cp -al, rm) is
--   not changed by that alone, as on a single host: a snapshot farm's next
--   snapshot adds links, not copies. A row of no known link count (NULL)
--   is changed by its ctime alone.
-- Before a name is linked, the host checks SRC's name of the row it links
--   to: the same inode as the name's, with the ctime that row recorded;
--   and DST's entry of it: still what ferry put there (rule 9). Else the
--   name's data is copied.
ALTER TABLE files ADD COLUMN nlink bigint;
ALTER TABLE files ADD COLUMN lgroup bigint;
ALTER TABLE files ADD COLUMN lwait boolean NOT NULL DEFAULT false;

-- A group's rows: its lowest done row, whether one is pending.
CREATE INDEX files_lgroup ON files (job, lgroup, size, mtime_ns, id)
    WHERE lgroup IS NOT NULL;
-- The rows waiting, by group.
CREATE INDEX files_lwait ON files (job, lgroup, size, mtime_ns, id)
    WHERE lwait;
-- The pending rows, by job, whether they wait, and id: a file claim
-- (job, NOT lwait, ORDER BY id) walks only those it may claim, never the
-- waiting ones of a large link group, and no other index of pending rows
-- is there for the planner to pick instead (a second partial index of
-- the claimable rows beside the old one was passed over in some runs:
-- every claim filtered every waiting row again).
DROP INDEX files_pending;
CREATE INDEX files_pending ON files (job, lwait, id) WHERE state = 0;
