#!/bin/bash
# t77-pg-verify: ferry --verify on a shared (PostgreSQL) job, from one
# host. Oracles: diff -r and cmp for the trees, psql for the rows' states,
# stat for what the repair touched, and the SQLite verify of the same
# damage on a copy of the same tree for the lines and the exit code.
# Proves:
#  A. a clean verify exits 0 and checks every file of the job (more than
#     one page of rows), writing nothing into DST;
#  B. a DST file corrupted behind its size and mtime and one deleted:
#     exit 5, both named as the SQLite verify names them (the same lines,
#     the same code); psql shows exactly those two rows pending, and their
#     directories' metadata to apply again;
#  C. a verify of the job before the repair says what is not copied yet;
#  D. the same copy command copies exactly those two (the others' inodes
#     and ctimes stay), DST equals SRC, every row done and holding the
#     size and mtime the copy read (not a stale scan's); a second verify
#     is clean;
#  E. --verify=source finds a SRC change behind an unchanged mtime; the
#     copy then brings it over; --verify=both is clean;
#  F. an unknown --job-name exits 2, makes no job and writes nothing (a
#     DST that did not exist is not made); a DST that is not the job's
#     (no mark; another job's mark) is refused with exit 2 and keeps no
#     mark of this verify.
# Skips, saying why, without root, network namespaces or PostgreSQL.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_need
pg_init
pg_start # the Unix socket only
URL=$PG_SOCK_URL

fy() { "$FERRY" --manifest "$URL" "$@"; }
jobid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# rows_not_done NAME: the job's file rows that are not done, as PATH STATE
# HASH-NULL lines, sorted
rows_not_done() {
	sql "SELECT CASE WHEN d.path = ''::bytea THEN '' ELSE
	     convert_from(d.path, 'UTF8') || '/' END || convert_from(f.name,
	     'UTF8') || ' ' || f.state || ' ' || (f.hash IS NULL) FROM
	     ferry.files f JOIN ferry.dirs d ON d.id = f.dir WHERE f.job =
	     $(jobid "$1") AND f.state <> 1 ORDER BY 1"
}
# dirs_to_apply NAME: the job's directories whose metadata is to apply
dirs_to_apply() {
	sql "SELECT convert_from(path, 'UTF8') FROM ferry.dirs WHERE job =
	     $(jobid "$1") AND state = 0 ORDER BY 1" | sed 's/^$/(root)/'
}
# snap DIR: every entry with its inode, size, mtime and ctime (ns)
snap() { (cd "$1" && find . -printf '%p %i %s %T@ %C@\n' | sort); }
same_tree() {
	if diff -r --no-dereference -x .ferry-job -- "$1" "$2" >"$LOG/diff" 2>&1; then
		ok "diff -r: $2 has $1's content"
	else
		fail "diff -r: $2 has $1's content"
		show "$LOG/diff"
	fi
}

# ---- the tree: more rows than one page (FERRY_PG_BATCH_MAX, 1000) -------
mkdir -p src/a/deep/er src/c src/many
for i in $(seq 1 8); do echo "a file $i" >"src/a/f$i"; done
for i in $(seq 1 5); do head -c $((i * 7000)) /dev/urandom >"src/c/f$i"; done
for i in $(seq 1 1200); do echo "$i" >"src/many/$i"; done
echo deep >src/a/deep/er/leaf
head -c 2000000 /dev/urandom >src/big
ln -s ../c/f1 src/a/link
touch -d '2001-02-03 04:05' src/a src/c src/a/deep
NFILES=$(find src ! -type d | wc -l)

expect_code 0 fy --job-name j -q src dst
same_tree src dst
cp -a src srcS # the SQLite verify's twin (its own SRC: a job of its own)
expect_code 0 "$FERRY" -q srcS dstS

# ---- A. clean ---------------------------------------------------------
snap dst >"$LOG/dst.before"
expect_code 0 fy --job-name j --verify --json src dst
expect_json "$LOG/out" verified "$NFILES"
expect_json "$LOG/out" mismatched 0
expect_code 0 fy --job-name j --verify src dst
check "stdout lists nothing" test ! -s "$LOG/out"
check "stderr: verified all $NFILES files, none differs" \
	grep -q "verified $NFILES files, 0 differ or are missing" "$LOG/err"
snap dst >"$LOG/dst.after"
check "a verify writes nothing into DST" cmp -s "$LOG/dst.before" "$LOG/dst.after"

# ---- B. damage: a/f3 corrupted (same size, same mtime), c/f2 deleted ---
damage() {
	printf 'X' | dd of="$1/a/f3" bs=1 seek=2 conv=notrunc status=none
	touch -r "src/a/f3" "$1/a/f3"
	rm "$1/c/f2"
	touch -r src/c "$1/c" # (the SQLite verify would name c/'s mtime too)
}
damage dst
damage dstS
check "the corruption keeps size and mtime" test \
	"$(stat -c '%s %Y' dst/a/f3)" = "$(stat -c '%s %Y' src/a/f3)"
differs() { ! cmp -s "$1" "$2"; }
check "... and changes the content" differs src/a/f3 dst/a/f3
snap dst >"$LOG/dst.damaged"
run "$FERRY" --verify srcS dstS
SQLITE_RC=$RC
sort "$LOG/out" >"$LOG/sqlite.out"
check "the SQLite verify of that damage exits 5" test "$SQLITE_RC" = 5
expect_code "$SQLITE_RC" fy --job-name j --verify src dst
sort "$LOG/out" >"$LOG/shared.out"
check "stdout names both as the SQLite verify does" \
	cmp -s "$LOG/sqlite.out" "$LOG/shared.out"
show "$LOG/shared.out"
check "... 'mismatch: a/f3' and 'missing: c/f2'" test \
	"$(cat "$LOG/shared.out")" = "$(printf 'mismatch: a/f3\nmissing: c/f2')"
check "stderr: verified $NFILES, 2 differ or are missing" \
	grep -q "verified $NFILES files, 2 differ or are missing" "$LOG/err"
check "stderr: verify found 2 missing or differing files" \
	grep -q "verify found 2 missing or differing files" "$LOG/err"
check "psql: exactly those two rows pending, hashes cleared" test \
	"$(rows_not_done j)" = "$(printf 'a/f3 0 true\nc/f2 0 true')"
dirs_to_apply j >"$LOG/dirs"
check "psql: a, c and the root have their metadata to apply again" test \
	"$(cat "$LOG/dirs")" = "$(printf '(root)\na\nc')"
show "$LOG/dirs"
snap dst >"$LOG/dst.after"
check "the verify wrote nothing into DST" cmp -s "$LOG/dst.damaged" "$LOG/dst.after"

# ---- C. not copied yet --------------------------------------------------
expect_code 5 fy --job-name j --verify src dst
check "a verify before the repair: 2 files are not copied yet" \
	grep -q "2 files are not copied yet: run the copy first" "$LOG/err"
check "... having verified the other $((NFILES - 2))" \
	grep -q "verified $((NFILES - 2)) files, 0 differ" "$LOG/err"

# ---- D. the same copy command repairs exactly those ---------------------
# the rows as a scan that saw an older version of SRC would leave them: the
# copy must record what it copied (else a verify finds its size differing)
sql "UPDATE ferry.files SET size = size + 1, mtime_ns = 0 WHERE state = 0"
expect_code 0 fy --job-name j -v src dst
sort "$LOG/out" >"$LOG/copied"
check "the copy copies exactly a/f3 and c/f2" test \
	"$(cat "$LOG/copied")" = "$(printf 'a/f3\nc/f2')"
show "$LOG/copied"
same_tree src dst
check "cmp: a/f3 repaired" cmp -s src/a/f3 dst/a/f3
snap dst | grep -v -e '^\./a/f3 ' -e '^\./c/f2 ' -e '^\./a ' -e '^\./c ' \
	-e '^\. ' >"$LOG/rest.after"
grep -v -e '^\./a/f3 ' -e '^\./c/f2 ' -e '^\./a ' -e '^\./c ' -e '^\. ' \
	"$LOG/dst.damaged" >"$LOG/rest.before"
check "no other entry of DST was touched (inode, size, times)" \
	cmp -s "$LOG/rest.before" "$LOG/rest.after"
check "the directories' times are SRC's again" test \
	"$(stat -c '%Y' dst/a dst/c)" = "$(stat -c '%Y' src/a src/c)"
check "psql: every row done" test -z "$(rows_not_done j)"
# row_stat PATH: size and mtime (s.ns) of the row of a file at the top of a/
row_stat() {
	sql "SELECT f.size || ' ' || (f.mtime_ns / 1000000000) || '.' ||
	     lpad((f.mtime_ns % 1000000000)::text, 9, '0') FROM ferry.files f
	     JOIN ferry.dirs d ON d.id = f.dir WHERE f.job = $(jobid j) AND
	     convert_from(d.path, 'UTF8') || '/' || convert_from(f.name, 'UTF8')
	     = '$1'"
}
check "psql: a/f3's row holds the size and mtime the copy read" test \
	"$(row_stat a/f3)" = "$(stat -c '%s %.9Y' src/a/f3)"
check "psql: c/f2's too" test "$(row_stat c/f2)" = "$(stat -c '%s %.9Y' src/c/f2)"
expect_code 0 fy --job-name j --verify src dst
check "a second verify: clean, all $NFILES" \
	grep -q "verified $NFILES files, 0 differ" "$LOG/err"

# ---- E. --verify=source -------------------------------------------------
touch -r src/c/f4 "$LOG/f4.time"
printf 'Y' | dd of=src/c/f4 bs=1 seek=5 conv=notrunc status=none
touch -r "$LOG/f4.time" src/c/f4
expect_code 5 fy --job-name j --verify=source src dst
check "--verify=source: 'mismatch: c/f4'" test "$(cat "$LOG/out")" = "mismatch: c/f4"
check "psql: c/f4 pending" test "$(rows_not_done j)" = "c/f4 0 true"
expect_code 0 fy --job-name j -q src dst
check "cmp: the copy brought SRC's new c/f4" cmp -s src/c/f4 dst/c/f4
expect_code 0 fy --job-name j --verify=both src dst
check "--verify=both: clean" grep -q "verified $NFILES files, 0 differ" "$LOG/err"

# ---- F. not the job's ---------------------------------------------------
jobs_before=$(sql "SELECT count(*) FROM ferry.jobs")
snap dst >"$LOG/dst.before"
expect_code 2 fy --job-name nosuch --verify src dst
check "an unknown job: says there is none" grep -q "no job 'nosuch'" "$LOG/err"
expect_code 2 fy --job-name nosuch --verify src dst-new
check "... a DST that did not exist is not made" test ! -e dst-new
check "... no job was made" test "$(sql "SELECT count(*) FROM ferry.jobs")" = "$jobs_before"
snap dst >"$LOG/dst.after"
check "... nothing was written into DST" cmp -s "$LOG/dst.before" "$LOG/dst.after"
cp -a src dst-plain
expect_code 2 fy --job-name j --verify src dst-plain
check "a DST without the job's mark: refused, saying so" \
	grep -q "holds no shared job's mark .ferry-job" "$LOG/err"
check "... and no mark is made" test ! -e dst-plain/.ferry-job
expect_code 0 fy --job-name k -q src dst-k
expect_code 2 fy --job-name j --verify src dst-k
check "another job's DST: refused, naming DST" grep -q "has another DST" "$LOG/err"
wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong"
[[ -z $wrong ]] || printf '%s\n' "$wrong" | show -
finish
