#!/bin/bash
# t15-remounted-dst: a destination is copied again when it was replaced or
# emptied, and only then, whether its identity changed or not.
#
# ferry records DST's identity (its root's dev:ino) in the manifest. The
# identity also changes when the same DST is only mounted again (a USB disk
# re-plugged gets another device number, exfat-fuse numbers inodes anew),
# and it may stay when DST is emptied or made again, so every run looks at
# a sample of the done files in DST. The change of
# identity is simulated by rewriting the recorded one with sqlite3, which
# makes each case deterministic whatever inode a recreated directory gets.
# Proves:
#  - the same DST under a new identity: a re-run copies nothing (-v prints
#    nothing, no warning), records the new identity, and DST is unchanged;
#  - DST deleted and recreated empty: the re-run warns that the destination
#    was replaced and copies every file again; also when its identity did
#    not change (emptied in place; three quarters of it deleted), and when
#    ferry itself makes DST again (whatever inode its root gets);
#  - under the same identity, DST files with other mtimes (a --no-times
#    run before) are no replaced DST; a quarter of the files deleted: the
#    ones the sample finds are copied again with a warning pointing to
#    --verify, which finds the rest; a stat of the sample that fails (EIO)
#    tells nothing; a copy whose size changed in DST is kept (rule 9); the
#    directories made anew for missing files get their modes and times;
#  - DST swapped for a tree that lacks half of the files: copied again;
#  - DST swapped for a tree with the same names and sizes but other mtimes:
#    not replaced when times are kept (nothing says they are copies: rule
#    9), and not copied with --no-times.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3

gen_tree src --seed 1515 --files 400 --no-links
set_times src
NFILES=$(find src -type f | wc -l)
WARNING='the destination was replaced since the last run: copying everything again'

expect_code 0 "$FERRY" -q src dst || die "first copy failed"
M=$(manifest_path src dst)
[[ -f $M ]] || die "no manifest for src dst"

identity() { sqlite3 "$M" "SELECT value FROM meta WHERE key = 'dst_identity'"; }
check "the manifest records DST's dev:ino" test "$(identity)" = "$(stat -c %d:%i dst)"

# new_identity: DST looks like another file system's root from now on.
new_identity() {
	sqlite3 "$M" "UPDATE meta SET value = '1:1' WHERE key = 'dst_identity'" ||
		die "cannot rewrite the recorded identity"
}

no_warning() { ! grep -q 'warning' "$LOG/err"; }

# copied_all WHAT: the last run (-v) listed every file of SRC, warned that
# DST was replaced, and DST equals SRC.
copied_all() {
	local n
	n=$(verbose_copied "$LOG/out" | while IFS= read -r p; do
		[[ -f src/$p && ! -L src/$p ]] && printf '%s\n' "$p"
	done | sort -u | wc -l)
	check "$1: every file copied again ($n of $NFILES)" test "$n" = "$NFILES"
	check "$1: the replaced destination is reported" grep -qF "$WARNING" "$LOG/err"
	tree_equal src dst
}

# --- the same DST, mounted again
inode_map dst >"$LOG/inodes.before"
new_identity
expect_code 0 "$FERRY" -v src dst
check "same DST, new identity: nothing copied (-v prints nothing)" test ! -s "$LOG/out"
check "same DST, new identity: no warning" no_warning
check "same DST, new identity: the new identity is recorded" \
	test "$(identity)" = "$(stat -c %d:%i dst)"
inode_map dst >"$LOG/inodes.after"
check "same DST, new identity: every file keeps its inode" \
	cmp -s "$LOG/inodes.before" "$LOG/inodes.after"
n=$(status_count src dst done)
check "same DST, new identity: status: done: $NFILES files (got '$n')" test "$n" = "$NFILES"

# --- DST deleted and made again, empty
rm -rf dst && mkdir dst
new_identity
expect_code 0 "$FERRY" -v src dst
copied_all "DST recreated empty"

# --- DST emptied under the same identity: its root stays, so its dev:ino
# is what the manifest recorded (the case of a DST deleted and made again
# whose new root gets the old inode number, as ext4 often gives)
rm -rf dst && cp -a src dst || die "cannot copy src to dst"
expect_code 0 "$FERRY" -q src dst
find dst -mindepth 1 -delete
check "DST emptied: its identity is the recorded one" test "$(identity)" = "$(stat -c %d:%i dst)"
expect_code 0 "$FERRY" -v src dst
copied_all "DST emptied, same identity"

# --- DST deleted, and made again by ferry itself (whatever inode it gets:
# the same one, as ext4 often gives, or another; the emptied case above is
# the one that pins the same identity)
rm -rf dst
expect_code 0 "$FERRY" -v src dst
copied_all "DST deleted, made again by ferry"

# --- the same identity, files whose mtime in DST is not SRC's: a first run
# with --no-times (copy times), then a default run; also what a file system
# that clamps times it cannot store leaves. Not a replaced DST.
rm -rf dst "$XDG_STATE_HOME/ferry"
expect_code 0 "$FERRY" -q --no-times src dst
M=$(manifest_path src dst)
expect_code 0 "$FERRY" -v src dst
check "mtimes differ, same identity: no warning" no_warning
# the run without --no-times applies the times in place (the metadata
# layer): -v lists "metadata: PATH" lines only, no copy
check "mtimes differ, same identity: nothing copied (-v lists metadata only)" \
	test -z "$(grep -v '^metadata: ' "$LOG/out")"
check "mtimes differ, same identity: the times are SRC's now (rsync -ani)" \
	test -z "$(rsync -ani --no-perms --no-owner --no-group src/ dst/ | grep -v '^\.d')"

# --- the same identity, a quarter of the files deleted from DST: the ones
# the sample finds missing are copied again, with a warning that points to
# --verify, which then finds the others; the next run restores them
rm -rf dst "$XDG_STATE_HOME/ferry"
expect_code 0 "$FERRY" -q src dst
M=$(manifest_path src dst)
(cd dst && find . -type f | sort | awk 'NR % 4 == 0' | xargs -r -d '\n' rm --) ||
	die "cannot thin out dst"
gone=$(($(find src -type f | wc -l) - $(find dst -type f | wc -l)))
expect_code 0 "$FERRY" -v src dst
check "a quarter deleted: the warning names the files missing from the sample" \
	grep -q "copied files looked at are missing from the destination: copying them again; ferry --verify finds any others" "$LOG/err"
check "a quarter deleted: not taken for a replaced destination" \
	eval '! grep -qF "$WARNING" "$LOG/err"'
n=$(verbose_copied "$LOG/out" | wc -l)
check "a quarter deleted: 1 to 32 files copied again, of the $gone deleted (got $n)" \
	test "$n" -ge 1 -a "$n" -le 32
verbose_copied "$LOG/out" >"$LOG/recopied"
check "a quarter deleted: each file copied again is now in DST" \
	eval '! while IFS= read -r p; do [[ -f dst/$p ]] || echo "$p"; done <"$LOG/recopied" | grep -q .'
run "$FERRY" --verify src dst
check "a quarter deleted: --verify finds the others missing (exit 5, got $RC)" \
	test "$RC" = 5 -o "$n" = "$gone"
expect_code 0 "$FERRY" -q src dst
tree_equal src dst

# --- the same identity, a chain of directories deleted from DST (chain/a
# holds only a directory, b, whose file is copied again): the directories
# made for it get their mode and times back (they were left 0700, with the
# time of the copy: only the file's own directory was set again)
mkdir -p src/chain/a/b
printf 'deep\n' >src/chain/a/b/deep
chmod 0751 src/chain src/chain/a
touch -d '2001-02-03 04:05:06.789' src/chain/a/b/deep src/chain/a/b src/chain/a src/chain src
expect_code 0 "$FERRY" -q src dst
rm -rf dst/chain
run "$FERRY" -q src dst
run "$FERRY" -q --verify src dst
expect_code 0 "$FERRY" -q src dst
check "a chain deleted: chain/ and chain/a/ have their mode back (0751)" \
	test "$(stat -c %a dst/chain dst/chain/a | sort -u)" = 751
tree_equal src dst
rm -rf src/chain
expect_code 0 "$FERRY" -q --delete src dst

# --- the same identity, a copy whose size changed in DST is not the copy
# (a clamped time or --no-times never changes a size): a job of one file.
# It was edited in DST since ferry copied it, so rule 9 keeps it: the file
# fails with the reason, and DST keeps the edit.
mkdir one && printf 'one\n' >one/f
expect_code 0 "$FERRY" -q one dst-one
printf 'appended in DST\n' >>dst-one/f
cp dst-one/f edited
expect_code 23 "$FERRY" -v one dst-one
check "size changed in DST, same identity: the file is not copied again" \
	test ! -s "$LOG/out"
check "size changed in DST, same identity: DST keeps the edit" cmp -s edited dst-one/f
check "size changed in DST, same identity: the failure says why" \
	grep -qF "failed: 'f': not replaced: the destination has a file here that was changed since ferry copied it" "$LOG/err"

# --- the same identity, three quarters deleted: most of the sample is
# missing, so DST counts as replaced and every file is copied again
(cd dst && find . -type f | sort | awk 'NR % 4 != 0' | xargs -r -d '\n' rm --) ||
	die "cannot thin out dst"
expect_code 0 "$FERRY" -v src dst
copied_all "three quarters deleted, same identity"

# --- a stat of the sample that fails for a moment (EIO) tells nothing:
# no reset (FERRY_FAULT; stat 1 is DST's root, stat 2 the sample's first)
if "$FERRY" --version | grep -q '^test build:'; then
	run env FERRY_FAULT=stat:2:5 FERRY_FAULT_LOG="$T/fault.log" "$FERRY" -v src dst
	check "EIO on the sample's stat: exit 0 (got $RC)" test "$RC" = 0
	check "EIO on the sample's stat: the fault fired" test -s "$T/fault.log"
	check "EIO on the sample's stat: no warning" no_warning
	check "EIO on the sample's stat: nothing copied" test ! -s "$LOG/out"
else
	say "SKIP the failing-stat case: needs a build with -DFERRY_TESTING=ON"
fi

# --- DST swapped for a tree that lacks half of the files (every second
# one, by name: a sample of 32 all in the other half is a 2^-32 chance).
# Each swap starts from a full copy (cp -a keeps sizes and mtimes), so that
# no case leans on the one before.
rm -rf dst && cp -a src dst || die "cannot copy src to dst"
(cd dst && find . -type f | sort | awk 'NR % 2' | xargs -r -d '\n' rm --) ||
	die "cannot thin out dst"
new_identity
expect_code 0 "$FERRY" -v src dst
copied_all "DST with half of the files"

# --- same names and sizes, other mtimes
rm -rf dst && cp -a src dst || die "cannot copy src to dst"
find dst -type f -exec touch -d @1600000000 {} +
new_identity
expect_code 0 "$FERRY" -v --no-times src dst
check "other mtimes, --no-times: nothing copied" test ! -s "$LOG/out"
check "other mtimes, --no-times: no warning" no_warning
new_identity
find dst -printf '%P %s %T@\n' | sort >"$T/before"
expect_code 23 "$FERRY" -v src dst
check "other mtimes, times kept: nothing replaced (rule 9)" test ! -s "$LOG/out"
check "other mtimes, times kept: DST untouched" \
	cmp -s "$T/before" <(find dst -printf '%P %s %T@\n' | sort)
check "other mtimes, times kept: each file says why" \
	test "$(grep -c 'not replaced: the destination has a file here' "$LOG/err")" -ge 100

finish
