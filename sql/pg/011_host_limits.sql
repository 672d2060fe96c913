-- Version 11. --bwlimit and --window of a shared job's hosts, set for all
-- of them at once (`ferry set --manifest URL --job-name NAME --bwlimit R
-- --window W`, src/manifest_pg/control.c); every host reads them about
-- once a second, with paused and host_jobs (004_control.sql).
--
-- host_bwlimit: bytes per second each host copies at most (0: no limit);
--   NULL: each host's own --bwlimit.
-- window_start, window_end: minutes after each host's local midnight of
--   the window in which it claims work (-1 and -1: none); NULL: each
--   host's own --window.
ALTER TABLE jobs ADD COLUMN host_bwlimit bigint;
ALTER TABLE jobs ADD COLUMN window_start integer;
ALTER TABLE jobs ADD COLUMN window_end integer;
