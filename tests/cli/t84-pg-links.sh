#!/bin/bash
# t84-pg-links: hard links in a shared job (issue 14 on the interface of
# fidelity: the names of one SRC inode are one file in DST, as a single
# host makes them) against a throw-away cluster on a Unix socket. SRC is
# behind bench/slowfs (2 ms an operation, inode numbers passed through), so
# that two hosts started together both join. Proves, with rsync -aHn -i,
# find's inode numbers, cmp and psql as oracles:
#  - two hosts at once on a tree of two cp -al snapshots and a file with
#    three names across directories and a FIFO with two: both exit 0; DST holds the same link
#    groups as SRC and as many inodes; rsync -aHn -i lists nothing; the
#    summaries' copies add up to SRC's inodes and their links to the other
#    names (each inode's data copied once); --verify exits 0;
#  - a third snapshot (cp -al): the next run links its names only (no copy,
#    the old names keep their DST inodes: a new link count moves every
#    inode's ctime, which alone changes no row), groups equal again;
#  - a linked file's content changed behind a restored mtime (touch -r): all
#    its DST names hold the new content, still one inode;
#  - a damaged DST copy: --verify names its 3 names (exit 5); the copy
#    command copies one and links the others, groups equal again;
#  - two different files of one size and mtime whose rows psql puts in one
#    link group (another host's inode numbering could): the second is
#    copied, not linked (SRC's names are not one inode here), DST holds
#    each one's own content;
#  - a snapshot removed (link counts drop), --delete: nothing copied, its
#    names deleted, the other names keep their DST inodes;
#  - a name given another inode of the same size and mtime (and two more
#    names): copied anew, its new name linked to it, the old inode's other
#    name keeps the old content;
#  - rows of no known link count (an older ferry's, psql) whose file is
#    rewritten behind a restored mtime: copied anew;
#  - a name that failed (psql), its other name then removed from SRC: the
#    next run ends (the retry does not wait for a group) and copies it;
#  - a user changed DST's copy of a first name, then a new snapshot: its
#    new name gets SRC's data, not a link to the user's file, which stays;
#  - --no-hard-links: another job copies every name apart.
# Skips, saying why, without root, PostgreSQL, rsync or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_slowfs_start rsync
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# same_links SRC DST WHAT: rsync -aHn -i lists nothing, the same link
# groups (lib.sh) and as many inodes
same_links() {
	rsync -aHn -i --numeric-ids --exclude .ferry-job "$1/" "$2/" >"$LOG/rsync" 2>&1
	check "$3: rsync -aHn -i lists nothing" test ! -s "$LOG/rsync" || show "$LOG/rsync"
	hardlinks_equal "$1" "$2"
	check "$3: as many inodes in DST as in SRC" \
		test "$(inodes "$1")" = "$(inodes "$2")"
}
inodes() { find "$1" ! -type d ! -name .ferry-job -printf '%i\n' | sort -u | wc -l; }
# total KEY FILE...: the sum of a --json summary's KEY
total() {
	local k=$1
	shift
	sed -n "s/.*\"$k\": \([0-9][0-9]*\).*/\1/p" "$@" | awk '{n += $1} END {print n + 0}'
}

mkdir -p src/snap1/a src/snap1/b src/x src/y
for i in $(seq 1 12); do echo "a $i" >"src/snap1/a/f$i"; done
for i in $(seq 1 8); do echo "b $i" >"src/snap1/b/g$i"; done
ln src/snap1/a/f1 src/snap1/a/f1-again # two names in one directory
echo "three names" >src/x/three
ln src/x/three src/y/three-2
ln src/x/three src/three-3
echo "alone" >src/alone
mkfifo src/fifo # a special file with two names: linked too
ln src/fifo src/x/fifo-2
cp -al src/snap1 src/snap2
mkdir -p "$MNT"
"$SLOWFS" --latency-us 2000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
TWO_HOSTS_JOB=links
fy() { "$FERRY" --manifest "$URL" --job-name links -j 4 --json "$@" "$MNT" "$T/dst"; }

# ---- two hosts at once --------------------------------------------------------
two_hosts
check "two hosts at once: both exit 0 (got $R1 $R2)" test "$R1 $R2" = "0 0" ||
	show "$T/h1.out.err"
check "... psql: both joined the job" \
	test "$(sql "SELECT count(*) FROM ferry.hosts WHERE job = $(jid links)")" = 2
same_links src dst "two hosts"
names=$(find src ! -type d | wc -l)
ino=$(inodes src)
copied=$(total files_copied "$T/h1.out" "$T/h2.out")
linked=$(total files_linked "$T/h1.out" "$T/h2.out")
check "... copies add up to SRC's $ino inodes, links to the other $((names - ino)) names (got $copied, $linked)" \
	test "$copied $linked" = "$ino $((names - ino))"
check "... psql: the job's link rows are SRC's names with more than one ($((names - 1)))" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid links) AND lgroup IS NOT NULL")" = $((names - 1))
run "$FERRY" --verify --manifest "$URL" --job-name links "$MNT" "$T/dst"
check "... --verify: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"

# ---- a third snapshot: its names linked, nothing copied -----------------------
inode_map dst/snap1 >"$T/before"
cp -al src/snap1 src/snap3
sleep 1.2 # slowfs's attribute cache
run fy
check "a third snapshot (cp -al): exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... its 21 names linked, nothing copied (got $(total files_linked "$LOG/out") linked, $(total files_copied "$LOG/out") copied)" \
	test "$(total files_linked "$LOG/out") $(total files_copied "$LOG/out")" = "21 0"
inode_map dst/snap1 >"$T/after"
check "... the old names keep their DST inodes" cmp -s "$T/before" "$T/after"
same_links src dst "a third snapshot"

# ---- content changed behind a restored mtime -----------------------------------
touch -r src/snap1/a/f2 "$T/stamp"
echo "new words" >src/snap1/a/f2
touch -r "$T/stamp" src/snap1/a/f2
sleep 1.2
run fy
check "a linked file rewritten, its mtime restored: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
for n in snap1 snap2 snap3; do
	check "... dst/$n/a/f2 holds the new content" cmp -s src/snap1/a/f2 "dst/$n/a/f2"
done
same_links src dst "a rewritten file"

# ---- a damaged copy: --verify names each of its names, a run repairs them ------
touch -r dst/snap1/b/g1 "$T/stamp"
printf 'B 1\n' >dst/snap1/b/g1 # one inode: its 3 names in DST
touch -r "$T/stamp" dst/snap1/b/g1
run "$FERRY" --verify --manifest "$URL" --job-name links "$MNT" "$T/dst"
check "a linked copy damaged in DST: --verify exits 5 (got $RC)" test "$RC" = 5 ||
	show "$LOG/err"
check "... naming its 3 names" \
	test "$(grep -c -E "mismatch: snap[123]/b/g1" "$LOG/out" "$LOG/err" | awk -F: '{n += $2} END {print n}')" = 3 ||
	show "$LOG/err"
run fy
check "... the copy command repairs it: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... one name copied, two linked (got $(total files_copied "$LOG/out") copied, $(total files_linked "$LOG/out") linked)" \
	test "$(total files_copied "$LOG/out") $(total files_linked "$LOG/out")" = "1 2"
for n in snap1 snap2 snap3; do
	check "... dst/$n/b/g1 holds SRC's content" cmp -s src/snap1/b/g1 "dst/$n/b/g1"
done
same_links src dst "a repaired copy"

# ---- a snapshot removed: nothing copied -------------------------------------------
inode_map dst/snap1 >"$T/before"
rm -rf src/snap3
sleep 1.2
run fy --delete
check "a snapshot removed (link counts 3 to 2), --delete: exit 0, nothing copied (got $RC, $(total files_copied "$LOG/out"))" \
	test "$RC $(total files_copied "$LOG/out")" = "0 0" || show "$LOG/err"
check "... its 21 names and 3 directories deleted from DST (got $(total files_deleted "$LOG/out"))" \
	eval 'test "$(total files_deleted "$LOG/out")" = 24 && test ! -e dst/snap3'
inode_map dst/snap1 >"$T/after"
check "... the other names keep their DST inodes" cmp -s "$T/before" "$T/after"
same_links src dst "a snapshot removed"

# ---- a name given another inode of the same size and mtime ------------------------
# its ctime moves, its link count moves too, but it is another inode: not
# the copy ferry made of the old one, nor one to link its new names to
printf 'B 2\n' >src/new-g2 # as long as "b 2"
touch -r src/snap1/b/g2 src/new-g2
mv -f src/new-g2 src/snap1/b/g2
ln src/snap1/b/g2 src/snap1/b/g2-more
ln src/snap1/b/g2 src/snap1/b/g2-more2 # 3 names: another link count than the row's 2
sleep 1.2
run fy
check "snap1/b/g2 another inode of its size and mtime, with a new name: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... dst/snap1/b/g2 holds the new content" cmp -s src/snap1/b/g2 dst/snap1/b/g2
check "... dst/snap1/b/g2-more too" cmp -s src/snap1/b/g2 dst/snap1/b/g2-more
check "... dst/snap2/b/g2 keeps the old one" cmp -s src/snap2/b/g2 dst/snap2/b/g2
same_links src dst "another inode"

# ---- rows of no known link count (an older ferry's) -----------------------------
sql "UPDATE ferry.files SET nlink = NULL WHERE job = $(jid links)
	AND name = convert_to('f4', 'UTF8')" >/dev/null
touch -r src/snap1/a/f4 "$T/stamp"
printf 'A 4\n' >src/snap1/a/f4
touch -r "$T/stamp" src/snap1/a/f4
sleep 1.2
run fy
check "rows of no known link count, f4 rewritten behind its mtime: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
for n in snap1 snap2; do
	check "... dst/$n/a/f4 holds the new content" cmp -s src/snap1/a/f4 "dst/$n/a/f4"
done

# ---- a name that failed, and its other name removed ---------------------------
# (a run again retries it as the scan finds it: no longer in a group, it
# must not wait for a group's first name; psql plays the failure)
sql "UPDATE ferry.files SET state = 2, error = 'planted', hash = NULL
	WHERE job = $(jid links) AND name = convert_to('f5', 'UTF8') AND dir = (SELECT id
	FROM ferry.dirs WHERE job = $(jid links) AND path = convert_to('snap1/a', 'UTF8'))" >/dev/null
rm dst/snap1/a/f5 src/snap2/a/f5
sleep 1.2
run timeout 60 "$FERRY" --manifest "$URL" --job-name links -j 4 --json "$MNT" "$T/dst"
check "a failed name whose other name is gone: the run ends, exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... dst/snap1/a/f5 copied" cmp -s src/snap1/a/f5 dst/snap1/a/f5

# ---- DST's copy of a first name changed by a user, then a new snapshot ------------
echo "a user's words" >dst/snap1/a/f3
cp -al src/snap1 src/snap4
sleep 1.2
run fy
check "a user changed dst/snap1/a/f3, then a new snapshot: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... dst/snap4/a/f3 is SRC's content, not linked to the user's file" \
	eval 'cmp -s src/snap4/a/f3 dst/snap4/a/f3 &&
	test "$(stat -c %i dst/snap4/a/f3)" != "$(stat -c %i dst/snap1/a/f3)"'
check "... the user's file is left as it is" grep -q "a user's words" dst/snap1/a/f3

# ---- two files one group only by their rows (their names stay apart after) ------------------------------------
# psql plays a host whose mount numbered two different files alike: the
# rows say one group, SRC's names say two inodes
mkdir -p src/z
echo "first content" >src/z/p
echo "other content" >src/z/q
ln src/z/p src/z/p2
ln src/z/q src/z/q2
touch -d '2020-01-01 00:00:00' src/z/p src/z/q
sleep 1.2
run fy
check "two files of one size and mtime: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
zq="job = $(jid links) AND dir = (SELECT id FROM ferry.dirs WHERE job = $(jid links)
	AND path = convert_to('z', 'UTF8')) AND name = convert_to('q', 'UTF8')"
sql "UPDATE ferry.files SET state = 0, hash = NULL, lgroup = (SELECT lgroup FROM ferry.files
	WHERE job = $(jid links) AND name = convert_to('p', 'UTF8')) WHERE $zq" >/dev/null
run fy
check "... q's row put in p's group, the job goes on: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... q copied, not linked (got $(total files_copied "$LOG/out") copied, $(total files_linked "$LOG/out") linked)" \
	test "$(total files_copied "$LOG/out") $(total files_linked "$LOG/out")" = "1 0"
check "... dst/z/q holds q's content" cmp -s src/z/q dst/z/q
check "... dst/z/p holds p's content" cmp -s src/z/p dst/z/p
run "$FERRY" --verify --manifest "$URL" --job-name links "$MNT" "$T/dst"
# (the user wrote through dst/snap1/a/f3, which snap2/a/f3 names too)
check "... --verify: exit 5, naming only the file the user changed, by its 2 names (got $RC)" \
	eval 'test "$RC" = 5 && test "$(grep -h -E "^(mismatch|missing): " "$LOG/out" "$LOG/err" | sort)" = "$(printf "mismatch: snap1/a/f3\nmismatch: snap2/a/f3")"' ||
	show "$LOG/out"

# ---- --no-hard-links ------------------------------------------------------------
run "$FERRY" --manifest "$URL" --job-name apart -j 4 --no-hard-links "$MNT" "$T/apart"
check "--no-hard-links: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... every name its own inode" \
	test "$(inodes apart)" = "$(find apart ! -type d ! -name .ferry-job | wc -l)"
rsync -an -i --numeric-ids --exclude .ferry-job src/ apart/ >"$LOG/rsync" 2>&1
check "... DST is SRC but for the links (rsync -an -i: nothing)" test ! -s "$LOG/rsync" ||
	show "$LOG/rsync"

wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong" ||
	printf '%s\n' "$wrong" | show -
finish
