#!/bin/bash
# t92-pg-files-from: --files-from in a shared job (issue 14: what a single
# host's run takes, a shared one takes), against a throw-away PostgreSQL
# cluster on a Unix socket. The oracle is rsync -a --files-from with the
# same list (no -r: a listed directory is made, not descended into, as
# ferry does), compared by diff -r; psql for the rows and the selection.
# Proves:
#  - one host with a list (./ and / prefixes, a directory, a
#    path SRC lacks): exit 24, the missing path said once, DST is rsync's
#    copy, no row of an unlisted name (psql);
#  - the job's selection records the list by its count and hash (psql);
#  - a host with another list joins a run that is not over: exit 1, saying
#    both; with the same list (written another way: the same paths) it goes
#    on: exit 24;
#  - two hosts at once with the list on a new job: DST is rsync's copy, each
#    host says the missing path, both exit 24;
#  - a run again with --delete after SRC lost a listed file and an
#    unlisted one: only the listed one is deleted (exit 24: it is listed
#    and missing now); the unlisted one's copy was never made;
#  - a listed file --max-size leaves out is not said missing, by the host
#    that listed its directory nor by one that joins later (which asks
#    the manifest, then SRC);
#  - --verify with --files-from: exit 1 (it verifies the whole job).
# Skips, saying why, without root, PostgreSQL or rsync.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start rsync

jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
fy() { "$FERRY" --manifest "$URL" -j 4 "$@"; }
# expect LIST: exp is what rsync -a --files-from=LIST makes of SRC
expect() {
	rm -rf exp
	mkdir exp
	rsync -a --files-from="$1" src/ exp/ >"$LOG/rsync.err" 2>&1 ||
		die "rsync --files-from failed: $(cat "$LOG/rsync.err")"
}
same() {
	diff -r -x .ferry-job "$2" "$1" >"$LOG/diff" 2>&1
	check "$3: DST is rsync --files-from's copy (diff -r)" test ! -s "$LOG/diff" ||
		show "$LOG/diff"
}
said_missing() { grep -c "nope/missing.*listed in --files-from but not in SRC" "$1"; }

mkdir -p src/a src/b/inner src/c/deep
for i in 1 2 3 4 5; do echo "a $i" >"src/a/f$i"; done
for i in 1 2 3; do echo "b $i" >"src/b/g$i"; done
echo inner >src/b/inner/x
echo deep >src/c/deep/x
echo t1 >src/t1
echo t2 >src/t2
head -c 2000 /dev/zero >src/big2
set_times src
printf '%s\n' a/f1 ./a/f3 /b c/deep/x t1 nope/missing >list
# rsync's copy: the same list without the missing path
grep -v nope list >list.ok

# ---- one host -------------------------------------------------------------------
run fy --job-name one --files-from list src dst1
check "one host with the list: exit 24 (got $RC): a listed path is missing" \
	test "$RC" = 24 || show "$LOG/err"
check "... the missing path said once" test "$(said_missing "$LOG/err")" = 1 ||
	show "$LOG/err"
expect list.ok
same dst1 exp "one host"
check "... b listed as a directory: made, not descended into" \
	eval 'test -d dst1/b && test -z "$(ls -A dst1/b)"'
check "... psql: no row of an unlisted name (a/f2, t2, b/g1)" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid one)
		AND name IN (convert_to('f2', 'UTF8'), convert_to('t2', 'UTF8'),
		convert_to('g1', 'UTF8'))")" = 0
check "psql: the selection records the list by its count and hash" \
	eval '[[ $(sql "SELECT selection FROM ferry.jobs WHERE id = $(jid one)") == "--files-from (6 paths, xxh128 "*")" ]]'

# ---- another list joins a run that is not over --------------------------------
sql "UPDATE ferry.files SET state = 0, hash = NULL WHERE job = $(jid one)
	AND name = convert_to('t1', 'UTF8')" >/dev/null
printf '%s\n' a/f1 t1 >list2
run fy --job-name one --files-from list2 src dst1
check "a host with another list joins a run not over: exit 1 (got $RC)" test "$RC" = 1 ||
	show "$LOG/err"
check "... saying both" \
	grep -q "is scanning SRC with --files-from (6 paths, xxh128 [0-9a-f]*); this host has --files-from (2 paths, xxh128 [0-9a-f]*)" "$LOG/err" ||
	show "$LOG/err"
# the same paths written another way
printf '%s\n' /t1 nope/missing c/deep/x b a/f3 ./a/f1 >list3
run fy --job-name one --files-from list3 src dst1
check "... the same paths written another way: it goes on, exit 24 (got $RC)" \
	test "$RC" = 24 || show "$LOG/err"
same dst1 exp "the run finished"

# ---- two hosts at once -----------------------------------------------------------
fy() { "$FERRY" --manifest "$URL" --job-name two -j 4 --files-from list "$@" src dst2; }
two_hosts
check "two hosts at once with the list: both exit 24 (got $R1 $R2)" test "$R1 $R2" = "24 24" ||
	show "$T/h1.out.err"
check "... each says the missing path" \
	test "$(said_missing "$T/h1.out.err") $(said_missing "$T/h2.out.err")" = "1 1"
same dst2 exp "two hosts"
fy() { "$FERRY" --manifest "$URL" -j 4 "$@"; }

# ---- a run again with --delete ------------------------------------------------------
rm src/a/f3 src/a/f2
sleep 1.1
run fy --job-name one --files-from list --delete src dst1
check "SRC lost a listed file and an unlisted one, --delete: exit 24 (got $RC)" \
	test "$RC" = 24 || show "$LOG/err"
check "... the listed one deleted" test ! -e dst1/a/f3
check "... and said missing" grep -q "a/f3.*listed in --files-from but not in SRC" "$LOG/err" ||
	show "$LOG/err"
check "... the others stay" eval 'cmp -s src/a/f1 dst1/a/f1 && cmp -s src/t1 dst1/t1'

# ---- a listed path the sizes leave out is not missing --------------------------------
printf '%s\n' big2 t1 nope/missing2 >list4
run fy --job-name sz --files-from list4 --max-size 100 src dst4
check "a listed file above --max-size: exit 24 (got $RC: nope/missing2)" test "$RC" = 24 ||
	show "$LOG/err"
check "... big2 not copied, not said missing" \
	eval 'test ! -e dst4/big2 && ! grep -q "big2.*listed in --files-from" "$LOG/err"'
# a host that joins the run after every directory was listed (psql leaves
# t1 to copy) asks the manifest about every listed path, then SRC
sql "UPDATE ferry.files SET state = 0, hash = NULL WHERE job = $(jid sz)
	AND name = convert_to('t1', 'UTF8')" >/dev/null
run fy --job-name sz --files-from list4 --max-size 100 src dst4
check "a host that listed nothing of it: exit 24 (got $RC)" test "$RC" = 24 || show "$LOG/err"
check "... says nope/missing2, not big2 (in SRC, left out by its size)" \
	eval 'grep -q "nope/missing2.*listed in --files-from" "$LOG/err" && ! grep -q "big2.*listed in --files-from" "$LOG/err"' ||
	show "$LOG/err"

# ---- --verify -----------------------------------------------------------------------
run fy --job-name one --files-from list --verify src dst1
check "--verify with --files-from: exit 1 (got $RC)" test "$RC" = 1
check "... saying it verifies the whole job" grep -q "verifies the whole job" "$LOG/err" ||
	show "$LOG/err"

finish
