-- Version 4. Live control of a shared job (`ferry set --manifest URL
-- --job-name NAME`, src/manifest_pg/control.c): every host reads these
-- about once a second and applies them.
--
-- paused: no host claims anything new (what is in flight finishes and is
--   marked; leases are renewed); `ferry set --resume` ends it.
-- host_jobs: copies in flight on each host; NULL: each host's own -j.
ALTER TABLE jobs ADD COLUMN paused boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN host_jobs integer;
