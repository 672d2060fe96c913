#!/bin/bash
# t55-farm: a farm of `cp -al` snapshots is linked the short way, and
# safely.
#
# 4 snapshots of a tree of 40 files (160 names, 40 inodes), no symlinks
# (ferry copies a hard-linked symlink as separate symlinks). Proves, with
# strace, rsync, find, stat and cmp as oracles:
#  - the first copy makes each follower name with one linkat straight to
#    its name: linkat calls = followers, renameat2 calls = the 40 copies,
#    no unlinkat of a temp name;
#  - DST equals SRC (rsync -aHAXn -i --numeric-ids lists nothing) and
#    holds as many inodes as SRC;
#  - a 5th snapshot: only its 40 names are linked (40 linkat, no
#    renameat2, the 160 old names keep their DST inodes), and only the 40
#    first names get their metadata again (--json meta_applied 40, not one
#    per name: the new link count moved every inode's ctime);
#  - a content change behind a restored mtime (touch -r) in a file of the
#    farm: all 5 DST names of it hold the new content, as one inode;
#  - a DST name ferry did not write, where a follower goes: left alone
#    (cmp) and reported, the other names copied;
#  - kill -9 during a copy of a larger farm, then a re-run: DST equals SRC,
#    no temp file left.
. "$(dirname "$0")/lib.sh" || exit 1

need_cmd rsync sqlite3
need_strace

# same_tree A B: rsync -aHAXn -i lists nothing, and the inode counts match.
same_tree() {
	rsync -aHAXn -i --numeric-ids "$1/" "$2/" >"$LOG/rsync" 2>&1
	if [[ ! -s $LOG/rsync ]]; then
		ok "$3: DST equals SRC with its hard links (rsync -aHAXn -i: nothing)"
	else
		fail "$3: DST equals SRC with its hard links (rsync lists:)"
		show "$LOG/rsync"
	fi
	local a b
	a=$(find "$1" -type f -printf '%i\n' | sort -u | wc -l)
	b=$(find "$2" -type f -printf '%i\n' | sort -u | wc -l)
	check "$3: as many inodes in DST as in SRC ($b, $a)" test "$a" -eq "$b"
}

# calls FILE SYSCALL: how many SYSCALL calls strace FILE logged.
# calls FILE SYSCALL: calls in FILE, leaving out the DST probe's own files
calls() { grep "^[0-9]* *$2(" "$1" | grep -vc ferry-probe; }

mkdir -p src/snap.1
for d in 0 1 2 3; do
	mkdir -p "src/snap.1/d$d"
	for f in $(seq 1 10); do
		head -c $((d * 300 + f * 11)) /dev/urandom >"src/snap.1/d$d/f$f"
	done
done
for s in 2 3 4; do cp -al src/snap.1 "src/snap.$s"; done
check "SRC: 160 names of 40 inodes" test \
	"$(find src -type f | wc -l) $(find src -type f -printf '%i\n' | sort -u | wc -l)" = "160 40"

# --- the first copy: one linkat per follower, nothing renamed or unlinked
env "$(no_leak_check_env)" strace -f -qq -e trace=linkat,renameat2,unlinkat \
	-o "$T/first.strace" "$FERRY" -q --json src dst >"$LOG/out" 2>"$LOG/err"
check "first copy: exit 0" test $? -eq 0
check "first copy: 120 linkat for 120 followers ($(calls "$T/first.strace" linkat))" \
	test "$(calls "$T/first.strace" linkat)" -eq 120
check "first copy: 40 renameat2, the copies ($(calls "$T/first.strace" renameat2))" \
	test "$(calls "$T/first.strace" renameat2)" -eq 40
# (the probes of DST's root at the start, .ferry-probe.*, are no temp names)
grep "^[0-9]* *unlinkat(" "$T/first.strace" | grep -v ferry-probe >"$LOG/unlinks"
check "first copy: no unlinkat of a temp name ($(grep -c ferry-part "$LOG/unlinks"))" \
	eval '! grep -q ferry-part "$LOG/unlinks"'
same_tree src dst "first copy"

# --- a 5th snapshot: its names only are linked
inode_map dst >"$LOG/inodes.before"
cp -al src/snap.1 src/snap.5
env "$(no_leak_check_env)" strace -f -qq -e trace=linkat,renameat2 \
	-o "$T/second.strace" "$FERRY" -q --json src dst >"$LOG/out" 2>"$LOG/err"
check "re-run: exit 0" test $? -eq 0
tail -n1 "$LOG/out" >"$LOG/second.json"
expect_json "$LOG/second.json" bytes_copied 0
expect_json "$LOG/second.json" files_linked 40
expect_json "$LOG/second.json" meta_applied 40
check "re-run: 40 linkat ($(calls "$T/second.strace" linkat))" \
	test "$(calls "$T/second.strace" linkat)" -eq 40
check "re-run: no renameat2 ($(calls "$T/second.strace" renameat2))" \
	test "$(calls "$T/second.strace" renameat2)" -eq 0
inode_map dst | grep -v $'\tsnap.5/' >"$LOG/inodes.after"
if diff "$LOG/inodes.before" "$LOG/inodes.after" >"$LOG/inodes.diff"; then
	ok "re-run: the 160 old names keep their DST inodes"
else
	fail "re-run: the old names keep their DST inodes (< before, > after)"
	show "$LOG/inodes.diff"
fi
same_tree src dst "re-run"

# --- new content behind a restored mtime, in a file with 5 names
f=src/snap.1/d2/f7
cp -p "$f" "$T/f7.old"
head -c "$(stat -c %s "$f")" /dev/urandom >"$T/f7.new"
cat "$T/f7.new" >"$f"
touch -r "$T/f7.old" "$f"
expect_code 0 "$FERRY" -q src dst || finish
bad=0
for s in 1 2 3 4 5; do
	cmp -s "$T/f7.new" "dst/snap.$s/d2/f7" || bad=$((bad + 1))
done
check "touch -r: all 5 DST names hold the new content ($bad do not)" test "$bad" -eq 0
check "touch -r: the 5 DST names are one inode" test \
	"$(stat -c %i dst/snap.*/d2/f7 | sort -u | wc -l)" -eq 1
same_tree src dst "touch -r"

# --- a DST name ferry did not write, where a follower goes (rule 9)
mkdir -p src2/a src2/b dst2/b
for f in 1 2 3; do head -c $((f * 100)) /dev/urandom >"src2/a/f$f"; done
for f in 1 2 3; do ln "src2/a/f$f" "src2/b/f$f"; done
printf 'not ferry'"'"'s\n' >dst2/b/f2
cp -p dst2/b/f2 "$T/mine"
expect_code 23 "$FERRY" src2 dst2
check "rule 9: the follower's DST name is left alone" cmp -s "$T/mine" dst2/b/f2
check "rule 9: the failure names it" grep -qF "b/f2" "$LOG/err"
check "rule 9: the other names are copied, linked" test \
	"$(stat -c %i dst2/a/f1)" = "$(stat -c %i dst2/b/f1)" -a \
	"$(stat -c %i dst2/a/f3)" = "$(stat -c %i dst2/b/f3)"
no_temp_files dst2

# --- kill -9 during the copy of a larger farm, then a re-run
gen_tree big/snap.1 --files 600 --seed 5
find big -type l -delete
for s in 2 3 4 5 6; do cp -al big/snap.1 "big/snap.$s"; done
kills=0
for delay in 0.15 0.3 0.5 0.8; do
	bg "$FERRY" -q big bigdst
	sleep "$delay"
	kill -KILL "$BG_PID" 2>/dev/null && kills=$((kills + 1))
	bg_wait
done
say "killed $kills of 4 runs"
expect_code 0 "$FERRY" -q big bigdst || finish
same_tree big bigdst "after kill -9"
no_temp_files bigdst

# --- a first name replaced the way an editor saves (a new inode): its
# follower is a file alone now; a later content change behind a restored
# mtime, and an xattr, still reach the follower's copy (found by review: the
# follower kept pointing at the replaced first name and wrote no row)
mkdir ed
echo one >ed/a
ln ed/a ed/b
expect_code 0 "$FERRY" -q ed eddst || finish
first=$(sqlite3 -readonly "$(manifest_path ed eddst)" "SELECT name FROM files WHERE hl = -1")
other=a
[ "$first" = a ] && other=b
sleep 1.1
echo newer >"ed/$first.tmp" && mv "ed/$first.tmp" "ed/$first"
expect_code 0 "$FERRY" -q ed eddst || finish
sleep 1.1
touch -r "ed/$other" "$T/ref" && printf 'ONE\n' >"ed/$other" && touch -r "$T/ref" "ed/$other"
expect_code 0 "$FERRY" -q ed eddst || finish
check "first name replaced: the follower's content change behind a restored mtime arrived" \
	cmp -s "ed/$other" "eddst/$other"
if setfattr -n user.t55 -v yes "ed/$other" 2>/dev/null; then
	expect_code 0 "$FERRY" -q ed eddst || finish
	check "first name replaced: the follower's new xattr arrived" \
		test "$(getfattr --only-values -n user.t55 "eddst/$other" 2>/dev/null)" = yes
fi
same_tree ed eddst "first name replaced"

finish
