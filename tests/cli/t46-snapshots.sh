#!/bin/bash
# t46-snapshots: a farm of `cp -al` snapshots; a new one costs only links.
#
# 20 snapshots of a tree of 200 files (4,000 names, 200 inodes), copied;
# then a 21st. Proves, with stat and find as oracles:
#  - the re-run writes no file data (--json bytes_copied 0, files_copied 0);
#  - it makes exactly the 200 new names, as links (--json files_linked 200;
#    each new name's DST inode is the DST inode of its name in snapshot 1);
#  - it leaves every old DST inode in place (find's inode list of the 20
#    old snapshots is the same before and after);
#  - DST equals SRC, hard links included (rsync -aHn -i --numeric-ids lists
#    nothing).
# Root: the names' owners are part of the metadata applied.
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) -eq 0 ]] || skip_all "needs root (owners)"
need_cmd rsync

mkdir -p src/snap.01
for d in 0 1 2 3 4 5 6 7 8 9; do
	mkdir -p "src/snap.01/d$d"
	for f in $(seq 1 20); do
		head -c $((d * 100 + f * 7)) /dev/urandom >"src/snap.01/d$d/f$f"
	done
done
for s in $(seq -w 2 20); do
	cp -al src/snap.01 "src/snap.$s"
done
check "SRC: 4000 names of 200 inodes" test \
	"$(find src -type f | wc -l) $(find src -type f -printf '%i\n' | sort -u | wc -l)" = "4000 200"

expect_code 0 "$FERRY" -q --json src dst || finish
tail -n1 "$LOG/out" >"$LOG/first.json"
expect_json "$LOG/first.json" files_linked 3800

(cd dst && find . -type f -printf '%i\t%P\n' | sort -k2) >"$LOG/inodes.before"
cp -al src/snap.01 src/snap.21
expect_code 0 "$FERRY" -q --json src dst || finish
tail -n1 "$LOG/out" >"$LOG/second.json"
expect_json "$LOG/second.json" bytes_copied 0
expect_json "$LOG/second.json" files_copied 0
expect_json "$LOG/second.json" files_linked 200

bad=0
while IFS= read -r p; do
	[[ $(stat -c %i "dst/snap.21/$p") == $(stat -c %i "dst/snap.01/$p") ]] ||
		bad=$((bad + 1))
done < <(cd src/snap.21 && find . -type f -printf '%P\n')
check "each of the 200 new names is a link to its DST inode ($bad are not)" \
	test "$bad" -eq 0 -a "$(find dst/snap.21 -type f | wc -l)" -eq 200

(cd dst && find . -type f ! -path './snap.21/*' -printf '%i\t%P\n' | sort -k2) >"$LOG/inodes.after"
if diff "$LOG/inodes.before" "$LOG/inodes.after" >"$LOG/inodes.diff"; then
	ok "the 4000 old names keep their DST inodes"
else
	fail "the old names keep their DST inodes (< before, > after)"
	show "$LOG/inodes.diff"
fi
rsync -aHn -i --numeric-ids src/ dst/ >"$LOG/rsync"
if [[ ! -s $LOG/rsync ]]; then
	ok "DST equals SRC with its hard links (rsync -aHn -i: nothing)"
else
	fail "DST equals SRC with its hard links (rsync -aHn -i lists:)"
	show "$LOG/rsync"
fi

finish
