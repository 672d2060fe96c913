#!/bin/bash
# t91-pg-unmarked: rule 9 in a shared job, against a throw-away PostgreSQL
# cluster on a Unix socket. A DST entry that appeared after the job began
# is taken for ferry's own copy (put in place by a host that died before
# its done mark, its metadata lost) only for a row a claim of which ended
# without a done outcome (its lease ran out, or its host let it go: a stop,
# a DST that failed its barrier); any other such entry is a user's, and is
# left alone. Before, every entry newer than the job's start counted as
# ferry's: a file a user wrote into DST while a job ran was overwritten.
# Oracles: cmp and grep of DST's files, psql for the rows.
#
# Proves, after a first run and with the job's start behind:
#  - SRC changes a and b; a user writes other text (another size than
#    either version of SRC's) over DST's a; psql leaves b's row pending
#    with the claim of a host that died (an expired lease, its token kept)
#    and DST's b as such a host's power cut could leave it (another size):
#    the next run exits 23, a is refused as changed since ferry copied it
#    and keeps the user's words, b is copied (SRC's bytes); the same for e,
#    its row pending as a host's release leaves it (no lease, unmarked);
#  - the same with neither: a user's file over c, c's row pending with no
#    claim: refused, kept; a run after the user removes it copies c.
# Skips, saying why, without root or PostgreSQL.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start

fy() { "$FERRY" --manifest "$URL" --job-name u -j 4 --json "$@" src dst; }
jid() { sql "SELECT id FROM ferry.jobs WHERE name = 'u'"; }
row() { echo "job = $(jid) AND name = convert_to('$1', 'UTF8')"; }

mkdir -p src/d
for f in a b c e; do head -c 3000 /dev/urandom >"src/d/$f"; done
run fy
check "first run: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... psql: 4 rows done, each with its claim's token kept" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 1
		AND claim_token IS NOT NULL AND lease_until IS NULL")" = 4
sleep 1.1 # every write below is in a later second than the job's start

# ---- a user's file, and a dead host's copy -----------------------------------
# a re-run (a new scan generation) of a and b: SRC changed; its rows are
# made pending with no claim
for f in a b; do head -c 4000 /dev/urandom >"src/d/$f"; done
echo "a user's own words" >dst/d/a
# b: a host claimed it, renamed its copy into place and died before its
# mark; a power cut left a shorter file (psql: the row pending, the
# claim's token kept, its lease run out)
run fy
check "a run after SRC changed a and b, DST's a a user's: exit 23 (got $RC)" \
	test "$RC" = 23 || show "$LOG/err"
check "... psql: a failed, as changed since ferry copied it" \
	eval '[[ $(sql "SELECT error FROM ferry.files WHERE $(row a) AND state = 2") == *"was changed since ferry copied it"* ]]'
check "... the user's words kept" grep -qx "a user's own words" dst/d/a
check "... b copied" cmp -s src/d/b dst/d/b
sql "UPDATE ferry.files SET state = 0, hash = NULL,
	lease_until = now() - interval '5 seconds' WHERE $(row b)" >/dev/null
head -c 1000 /dev/zero >dst/d/b
check "psql: b's row pending under a claim whose lease ran out" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE $(row b) AND state = 0
		AND claim_token IS NOT NULL AND lease_until < now()")" = 1
run fy
check "a host meets b as a dead host may have left it: exit 23 (got $RC: a still refused)" \
	test "$RC" = 23 || show "$LOG/err"
check "... b taken for ferry's copy and copied again (SRC's bytes)" cmp -s src/d/b dst/d/b
check "... the user's a still kept" grep -qx "a user's own words" dst/d/a
check "... psql: b's row done, no longer unmarked" \
	test "$(sql "SELECT state || ' ' || unmarked::int FROM ferry.files WHERE $(row b)")" = "1 0"
# e: a host let its claim go (a stop, or its DST failed the barrier) after
# the rename, before the mark
sql "UPDATE ferry.files SET state = 0, hash = NULL, lease_until = NULL,
	unmarked = true WHERE $(row e)" >/dev/null
head -c 10 /dev/zero >dst/d/e
run fy
check "a host meets e as a host that let it go may have left it: exit 23 (got $RC: a)" \
	test "$RC" = 23 || show "$LOG/err"
check "... e taken for ferry's copy and copied again (SRC's bytes)" cmp -s src/d/e dst/d/e

# ---- a user's file over a row no claim left ----------------------------------
echo "another user's file" >dst/d/c
sql "UPDATE ferry.files SET state = 0, hash = NULL, claim_token = NULL,
	lease_until = NULL WHERE $(row c)" >/dev/null
run fy
check "a user's file over c, c's row pending with no claim: exit 23 (got $RC)" \
	test "$RC" = 23 || show "$LOG/err"
check "... c kept" grep -qx "another user's file" dst/d/c
rm dst/d/a dst/d/c
run fy
check "the user removes both: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... a and c copied" eval 'cmp -s src/d/a dst/d/a && cmp -s src/d/c dst/d/c'
check "... psql: every row done" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state <> 1")" = 0

finish
