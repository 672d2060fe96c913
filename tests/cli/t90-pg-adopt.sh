#!/bin/bash
# t90-pg-adopt: --adopt in a shared job (issue 14: what a single host's run
# takes, a shared one takes), against a throw-away PostgreSQL cluster on a
# Unix socket. A host with --adopt keeps what DST already holds equal to
# SRC (hashed on both sides) for the files it claims, as t68 proves on one
# host. Oracles: find (inode numbers and ns mtimes of DST's entries), cmp,
# rsync -anciHAX, diff -r, xxh128sum -c of the hashes psql reads, psql for
# the rows.
#
# Proves:
#  A. over a cp -a'd DST: exit 0, every file and the symlink adopted
#     (-v "adopted:" lines, the summary's count, none copied), DST's
#     entries keep their inodes and mtimes (find), rsync -anciHAX finds
#     nothing, every row done (psql) with DST's hash (xxh128sum -c); a
#     plain run after it copies and adopts nothing;
#  B. the same without --adopt: exit 0, nothing adopted, every file
#     copied again (a new inode each: rule 9 lets ferry replace a copy of
#     this very version of SRC), rsync -anciHAX and xxh128sum -c clean;
#  C. a DST file of SRC's size and mtime with another content is copied
#     again (a warning names it; a new inode, SRC's bytes), one of another
#     size is refused (exit 23) and keeps its bytes, the rest adopted;
#  D. two hosts at once with --adopt: both exit 0, their adoptions add up
#     to every entry, DST's inodes unchanged;
#  E. --adopt with --verify of a shared job: exit 1, saying why.
# Skips, saying why, without root, PostgreSQL, rsync or xxh128sum.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start rsync xxh128sum python3

fy() { "$FERRY" --manifest "$URL" -j 4 "$@"; }
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# ids DIR: each entry below DIR (but the job's mark) with its inode and
# mtime, by path
ids() { (cd "$1" && find . -mindepth 1 ! -name .ferry-job -printf '%p %i %T@\n' | sort); }
same_meta() {
	rsync -anciHAX --exclude=/.ferry-job "$1/" "$2/" >"$LOG/rsync" 2>&1
	check "$3: rsync -anciHAX finds nothing to do" test ! -s "$LOG/rsync" ||
		show "$LOG/rsync"
}
# hashes_ok JOB DST: xxh128sum -c of the job's recorded file hashes in DST
hashes_ok() {
	local dst=$2
	sql "SELECT encode(f.hash, 'hex') || '  ' || CASE WHEN d.path = ''::bytea
	     THEN '' ELSE convert_from(d.path, 'UTF8') || '/' END ||
	     convert_from(f.name, 'UTF8') FROM ferry.files f JOIN ferry.dirs d
	     ON d.id = f.dir WHERE f.job = $(jid "$1") AND f.type = 1" >"$LOG/sums"
	check "$1: xxh128sum -c of the $(wc -l <"$LOG/sums") recorded hashes in DST" \
		eval '[[ -s $LOG/sums ]] && (cd "$dst" && xxh128sum -c --quiet "$LOG/sums") >"$LOG/sums.out" 2>&1' ||
		show "$LOG/sums.out"
}
not_done() { sql "SELECT count(*) FROM ferry.files WHERE job = $(jid "$1") AND state <> 1"; }

# ---- the tree: 24 files, an empty one, a 3 MiB one, a symlink --------------
mkdir -p src/a/b src/c
for i in $(seq 1 12); do printf 'file a %s\n' "$i" >"src/a/f$i"; done
for i in $(seq 1 12); do head -c $((i * 700)) /dev/urandom >"src/c/g$i"; done
head -c $((3 << 20)) /dev/urandom >src/big
: >src/empty
echo deep >src/a/b/deep
ln -s ../big src/a/sym
chmod 0640 src/c/g2
set_times src
N=$(find src -type f -o -type l | wc -l) # 28

# ---- A: over a cp -a'd DST ---------------------------------------------------
cp -a src dstA
ids dstA >"$T/idsA"
run fy --job-name A --adopt -v src dstA
check "A: --adopt over a cp -a'd DST: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "A: -v lists all $N files and the symlink as adopted" \
	test "$(grep -c '^adopted: ' "$LOG/out")" = "$N"
check "A: ... the symlink among them" grep -qx 'adopted: a/sym' "$LOG/out"
check "A: the summary says $N adopted" grep -q "ferry: $N adopted" "$LOG/err" || show "$LOG/err"
check "A: nothing copied (no -v line of a copy)" test "$(grep -vc '^adopted: ' "$LOG/out")" = 0
ids dstA >"$T/idsA2"
check "A: DST's entries keep their inodes and mtimes (find)" cmp -s "$T/idsA" "$T/idsA2" ||
	diff "$T/idsA" "$T/idsA2" | head -5
same_meta src dstA A
check "A: psql: every row done" test "$(not_done A)" = 0
hashes_ok A dstA
run fy --job-name A --json src dstA
check "A: a plain run after it: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "A: ... copies and adopts nothing" \
	test "$(json_get "$LOG/out" files_copied) $(json_get "$LOG/out" files_adopted)" = "0 0"

# ---- B: the same DST without --adopt ----------------------------------------
# (rule 9 lets ferry replace a copy of this very version of SRC: size and
# mtime, as cp -a leaves it; nothing is lost, nothing adopted)
cp -a src dstB
ids dstB >"$T/idsB"
run fy --job-name B --json src dstB
check "B: without --adopt over a cp -a'd DST: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "B: ... adopts nothing, copies all $N" \
	test "$(json_get "$LOG/out" files_adopted) $(json_get "$LOG/out" files_copied)" = "0 $N"
ids dstB >"$T/idsB2"
# paths whose entry kept its inode, files and symlinks only
kept=$(join "$T/idsB" "$T/idsB2" | awk '$2 == $4 {print $1}' |
	while read -r p; do [[ -d dstB/$p ]] || echo "$p"; done | wc -l)
check "B: ... each file and symlink a new inode (find: $kept kept theirs)" test "$kept" = 0
same_meta src dstB B
hashes_ok B dstB

# ---- C: a changed content, a changed size ------------------------------------
cp -a src dstC
# the same size and mtime, another content
printf 'FILE A 3\n' >dstC/a/f3 && touch -r src/a/f3 dstC/a/f3
ino_f3=$(stat -c %i dstC/a/f3)
# another size: not the file ferry would take over
echo "a user's longer text" >dstC/c/g5
run fy --job-name C --adopt --json src dstC
check "C: exit 23 (got $RC): one file refused" test "$RC" = 23 || show "$LOG/err"
check "C: the changed content is copied again, a warning names it" \
	grep -q "a/f3.*another content\|another content.*a/f3" "$LOG/err" || show "$LOG/err"
check "C: ... SRC's bytes, a new inode" \
	eval 'cmp -s src/a/f3 dstC/a/f3 && [[ $(stat -c %i dstC/a/f3) != "$ino_f3" ]]'
check "C: the file of another size keeps its bytes" grep -qx "a user's longer text" dstC/c/g5
check "C: ... and fails (files_failed 1)" test "$(json_get "$LOG/out" files_failed)" = 1
check "C: the others adopted ($((N - 2))), one copied" \
	test "$(json_get "$LOG/out" files_adopted) $(json_get "$LOG/out" files_copied)" = "$((N - 2)) 1"

# ---- D: two hosts at once ----------------------------------------------------
cp -a src dstD
ids dstD >"$T/idsD"
fy() { "$FERRY" --manifest "$URL" --job-name D -j 4 --adopt --json "$@" src dstD; }
two_hosts
check "D: two hosts with --adopt at once: both exit 0 (got $R1 $R2)" test "$R1 $R2" = "0 0" ||
	show "$T/h1.out.err"
a1=$(json_get "$T/h1.out" files_adopted) a2=$(json_get "$T/h2.out" files_adopted)
check "D: their adoptions add up to $N (got $a1 + $a2)" test "$((a1 + a2))" = "$N"
ids dstD >"$T/idsD2"
check "D: DST's inodes and mtimes unchanged" cmp -s "$T/idsD" "$T/idsD2"
same_meta src dstD D
hashes_ok D dstD

# ---- E: --adopt --verify ----------------------------------------------------
run "$FERRY" --manifest "$URL" --job-name A --adopt --verify src dstA
check "E: --adopt --verify of a shared job: exit 1 (got $RC)" test "$RC" = 1
check "E: ... saying why" grep -q -- "--adopt goes with a copy" "$LOG/err" || show "$LOG/err"

finish
