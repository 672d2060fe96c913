#!/bin/bash
# t95-pg-dry-delete-rules: ferry -n --delete of a shared job follows the
# run's own rules where they are subtle (issue 14; a review of t94's
# commit found each of these wrong). Each case runs the dry run, then the
# real run with the same options; the oracle is the real run (exit code,
# its "deleting" and "not deleting" lines, but for DST's directories,
# which a dry run does not list: the same) plus what find and
# the case itself say must be listed. Against a throw-away PostgreSQL
# cluster on a Unix socket. Proves:
#  - --exclude of a directory of 200 files while one file of another goes:
#    not refused as an emptied SRC (a run's selection keeps the excluded
#    rows), the one file listed;
#  - --max-size below a copied file that is still in SRC: not listed;
#  - a directory of 150 files renamed: not refused (the run's guard weighs
#    the 150 new copies done), the 150 old names listed (find, comm);
#  - --max-delete 2 with three gone and the last one rewritten in DST: the
#    rewrite listed as kept for --max-delete (the run's order), exit 25;
#  - a run under way (psql) whose directory to list is gone from SRC: its
#    files listed, exit 24 (gone, not a scan error);
#  - a run under way with a directory whose listing failed (psql): listed
#    again, as a joining run does; the file gone elsewhere listed;
#  - a job whose only work left is another host's deletion under a live
#    lease (psql): not over, as a join finds it (its run goes on, no new
#    scan), so a new file in SRC is not listed; once the lease is gone,
#    it is;
#  - a run under way whose first host gave --exclude zz and --max-delete 3
#    (psql keeps them for the gen): -n with the same options is accepted;
#    without --exclude, or with another --max-delete, refused with exit 1
#    and the run's own message, as the run with those options is.
# Skips, saying why, without root or PostgreSQL.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start

fy() { "$FERRY" --manifest "$URL" -j 4 "$@"; }
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# lines FILE: the deletions and kept deletions listed, sorted
lines() { grep -E '^(not )?deleting ' "$1" | sort; }
gone() {
	comm -13 <(cd "$1" && find . -type f -printf '%P\n' | sort) \
		<(cd "$2" && find . -type f ! -name .ferry-job -printf '%P\n' | sort)
}
# pair WHAT CODE JOB SRC DST OPTS...: the dry run, then the run; both exit
# CODE and list the same; the dry run's list in $T/dry
pair() {
	local what=$1 code=$2 job=$3 src=$4 dst=$5
	shift 5
	run fy --job-name "$job" -n --delete "$@" "$src" "$dst"
	local drc=$RC
	lines "$LOG/out" >"$T/dry"
	cp "$LOG/err" "$T/dry.err"
	# (a dry run lists no directory, as on a single host: the run's
	# deletions of DST's directories are left out)
	(cd "$dst" && find . -mindepth 1 -type d -printf 'deleting %P\n') >"$T/dirs"
	run fy --job-name "$job" --delete -v "$@" "$src" "$dst"
	lines "$LOG/out" | grep -vxF -f "$T/dirs" >"$T/real"
	check "$what: -n exits $code (got $drc), the run too (got $RC)" \
		test "$drc $RC" = "$code $code" || show "$T/dry.err"
	check "... the dry run lists what the run deleted and kept" \
		cmp -s "$T/dry" "$T/real" || diff "$T/dry" "$T/real" | head
}
setup() { # setup JOB SRC DST: the first run
	run fy --job-name "$1" "$2" "$3"
	[[ $RC == 0 ]] || die "job $1's first run: exit $RC: $(head -c 300 "$LOG/err")"
}
# begin JOB: psql begins the job's next scan as a host's rerun does
# (manifest_pg/rerun.c), the root listed, its subdirectories to list
begin() {
	local j
	j=$(jid "$1")
	sql "UPDATE ferry.jobs SET gen = gen + 1, gen_started = now() WHERE id = $j;
		UPDATE ferry.dirs SET list_state = 1, state = 0, gen = (SELECT gen
		FROM ferry.jobs WHERE id = $j) WHERE job = $j AND parent IS NULL;
		UPDATE ferry.dirs SET list_state = 0, state = 0, gen = (SELECT gen
		FROM ferry.jobs WHERE id = $j) WHERE job = $j AND parent IS NOT NULL" >/dev/null
}

# ---- --exclude -------------------------------------------------------------
mkdir -p sA/a sA/b
for i in $(seq 1 200); do echo "a $i" >"sA/a/f$i"; done
for i in $(seq 1 10); do echo "b $i" >"sA/b/g$i"; done
setup A sA dA
rm sA/b/g1
pair "--exclude a, b/g1 gone" 0 A sA dA --exclude a
check "... b/g1 listed alone" test "$(cat "$T/dry")" = "deleting b/g1"

# ---- --max-size ---------------------------------------------------------------
mkdir -p sB
echo small >sB/small
head -c 1000 /dev/zero >sB/big
setup B sB dB
pair "--max-size 100, a 1000-byte copy still in SRC" 0 B sB dB --max-size 100
check "... nothing listed, the copy kept" eval 'test ! -s "$T/dry" && test -f dB/big'

# ---- a directory renamed -----------------------------------------------------------
mkdir -p sD/old sD/k
for i in $(seq 1 150); do echo "d $i" >"sD/old/f$i"; done
echo k >sD/k/k
setup D sD dD
mv sD/old sD/new
gone sD dD | sed 's/^/deleting /' | sort >"$T/wantD"
pair "a directory of 150 files renamed" 0 D sD dD
check "... the 150 old names listed (find, comm)" cmp -s "$T/wantD" "$T/dry" ||
	diff "$T/wantD" "$T/dry" | head

# ---- --max-delete and a rewritten copy ----------------------------------------------
mkdir -p sC/d
echo stay >sC/stay
for i in 1 2 3; do echo "c $i" >"sC/d/f$i"; done
setup C sC dC
last=$(sql "SELECT convert_from(name, 'UTF8') FROM ferry.files WHERE job = $(jid C)
	AND name <> convert_to('stay', 'UTF8') ORDER BY id DESC LIMIT 1")
rm sC/d/f1 sC/d/f2 sC/d/f3
echo "a user's rewrite" >"dC/d/$last"
pair "--max-delete 2, three gone, the last rewritten in DST" 25 C sC dC --max-delete 2
check "... the rewrite listed as kept for --max-delete" \
	grep -qx "not deleting d/$last: --max-delete 2 reached" "$T/dry" || cat "$T/dry"

# ---- a run under way: a directory to list gone from SRC ----------------------------------
mkdir -p sE/t/a sE/t/b
for i in 1 2 3; do
	echo "a $i" >"sE/t/a/f$i"
	echo "b $i" >"sE/t/b/g$i"
done
setup E sE dE
begin E
sql "UPDATE ferry.dirs SET list_state = 1 WHERE job = $(jid E) AND path = convert_to('t', 'UTF8')" >/dev/null
rm -r sE/t/b
pair "under way, a directory to list gone from SRC" 24 E sE dE
check "... its three files listed" test "$(grep -c '^deleting t/b/' "$T/dry")" = 3 || cat "$T/dry"

# ---- a run under way: a directory whose listing failed -------------------------------------
mkdir -p sF/a sF/b
for i in 1 2 3; do
	echo "a $i" >"sF/a/f$i"
	echo "b $i" >"sF/b/g$i"
done
setup F sF dF
begin F
sql "UPDATE ferry.dirs SET list_state = 2, error = 'cannot read directory: Permission denied'
	WHERE job = $(jid F) AND path = convert_to('b', 'UTF8')" >/dev/null
rm sF/a/f1
pair "under way, b's listing failed" 0 F sF dF
check "... a/f1 listed alone" test "$(cat "$T/dry")" = "deleting a/f1"

# ---- a deletion under another host's live lease ------------------------------------------
mkdir -p sH/a
for i in 1 2 3; do echo "h $i" >"sH/a/f$i"; done
setup H sH dH
echo new >sH/a/new
sql "UPDATE ferry.files SET state = 5, lease_until = now() + interval '1 hour',
	claim_token = 1 WHERE job = $(jid H) AND name = convert_to('f2', 'UTF8')" >/dev/null
run fy --job-name H -n sH dH
check "-n while another host's deletion holds a lease: exit 0 (got $RC), a/new not listed" \
	eval 'test "$RC" = 0 && ! grep -q "a/new" "$LOG/out"' || show "$LOG/out" "$LOG/err"
sql "UPDATE ferry.files SET lease_until = NULL, claim_token = NULL WHERE job = $(jid H)
	AND name = convert_to('f2', 'UTF8')" >/dev/null
run fy --job-name H -n sH dH
check "... the lease gone: the run is over, a new scan lists a/new" \
	eval 'test "$RC" = 0 && grep -qx "a/new" "$LOG/out"' || show "$LOG/out" "$LOG/err"

# ---- a run under way: its selection and --max-delete ------------------------------------
mkdir -p sG/a
for i in 1 2 3; do echo "g $i" >"sG/a/f$i"; done
echo z >sG/zz
run fy --job-name G --exclude zz --delete --max-delete 3 sG dG
check "job G with --exclude zz --max-delete 3: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
begin G
# the gen keeps what its first host gave (the text the run above recorded)
sql "UPDATE ferry.jobs SET selection_gen = gen, del_gen = gen, del_used = 0,
	del_held = 0 WHERE id = $(jid G)" >/dev/null
rm sG/a/f1
run fy --job-name G -n --delete --exclude zz --max-delete 3 sG dG
check "-n with the run's own selection and --max-delete: exit 0 (got $RC), a/f1 listed" \
	eval 'test "$RC" = 0 && grep -qx "deleting a/f1" "$LOG/out"' || show "$LOG/err"
for opts in "--max-delete 3" "--exclude zz --max-delete 2"; do
	# shellcheck disable=SC2086 # the options, split
	run fy --job-name G -n --delete $opts sG dG
	drc=$RC
	cp "$LOG/err" "$T/dry.err"
	# shellcheck disable=SC2086
	run fy --job-name G --delete $opts sG dG
	check "-n --delete $opts: exit 1 as the run's (got $drc and $RC)" \
		test "$drc $RC" = "1 1" || show "$T/dry.err"
	check "... with the run's message" \
		eval 'test "$(grep "^ferry: job" "$T/dry.err")" = "$(grep "^ferry: job" "$LOG/err")" &&
		test -n "$(grep "^ferry: job" "$LOG/err")"' || show "$T/dry.err" "$LOG/err"
done
check "... nothing deleted by either" test -f dG/a/f1

finish
