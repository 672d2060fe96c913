#!/bin/bash
# t52-dir-meta: directories in the metadata layer. A change of a SRC
# directory's xattrs or ACLs alone moves only its ctime (not its mtime):
# the next run applies it to DST's directory in place; --verify checks
# directories' metadata too.
#
# Proves (oracles: getfattr -d -m - -e hex, getfacl -n, stat -c,
# rsync -aHAXn -i --numeric-ids, which itemizes nothing when equal):
#  - setfattr -n user.dy on a SRC directory (and on SRC's root): the next
#    run gives DST's directory the xattr, copies no data (files keep
#    their inodes);
#  - setfattr -x: DST's directory loses it;
#  - setfacl -d (a default ACL) on a directory: DST's getfacl equals SRC's;
#    setfacl -k: DST's default ACL goes too;
#  - a run with nothing changed re-applies nothing (DST directories'
#    ctimes stay);
#  - rows of an older manifest (no ctime recorded: NULL) get one metadata
#    pass (an xattr added in DST behind ferry's back is removed);
#  - --verify lists a DST directory whose mode, mtime or xattrs were
#    changed as "metadata differs: DIR/: PARTS" (exit 5, --json
#    meta_differs), the next run repairs it, a verify then is clean.
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) == 0 ]] || skip_all "needs root (xattrs of every namespace, as t40)"
need_cmd getfattr setfattr getfacl setfacl rsync stat sqlite3
setfattr -n user.probe -v 1 "$T/log" 2>/dev/null ||
	skip_all "$TMPDIR holds no user xattrs"
setfacl -m u:$NOBODY_UID:r "$T/log" 2>/dev/null || skip_all "$TMPDIR holds no ACLs"
setfacl -b "$T/log"
setfattr -x user.probe "$T/log"

umask 022
M=$T/m.db
mkdir -p src/d/sub src/plain
printf 'one\n' >src/d/f
printf 'two\n' >src/d/sub/g
printf 'three\n' >src/plain/h
setfattr -n user.keep -v k src/d

# dirs_xattrs DIR: the xattrs (ACLs too) of DIR's directories, in hex.
dirs_xattrs() {
	(cd "$1" && find . -type d -print0 | sort -z |
		xargs -0 getfattr -h -d -m - -e hex -- 2>/dev/null)
}
dirs_acls() {
	(cd "$1" && find . -type d -print0 | sort -z | xargs -0 getfacl -n -- 2>/dev/null)
}
dirs_ctimes() { (cd "$1" && find . -type d -print0 | sort -z | xargs -0 stat -c '%n %Z.%z'); }

# same DESC FN: FN of src and of dst agree.
same() {
	"$2" src >"$LOG/$2.a"
	"$2" dst >"$LOG/$2.b"
	if diff "$LOG/$2.a" "$LOG/$2.b" >"$LOG/$2.diff"; then
		ok "$1"
	else
		fail "$1 (< src, > dst)"
		show "$LOG/$2.diff" 20
	fi
}

rsync_equal() {
	rsync -aHAXn -i --numeric-ids src/ dst/ >"$LOG/rsync" 2>&1
	if [[ $? == 0 && ! -s $LOG/rsync ]]; then
		ok "rsync -aHAXn -i finds dst equal to src ($1)"
	else
		fail "rsync -aHAXn -i finds dst equal to src ($1)"
		show "$LOG/rsync"
	fi
}

inodes() { stat -c %i dst/d/f dst/d/sub/g dst/plain/h; }

# run_copy WHAT: a plain run that must copy no data.
run_copy() {
	expect_code 0 "$FERRY" --json --manifest "$M" src dst
	expect_json "$LOG/out" files_copied 0
}

expect_code 0 "$FERRY" -q --manifest "$M" src dst
ino=$(inodes)
rsync_equal "first copy"

# an xattr added to a directory, and to SRC's root
setfattr -n user.dy -v 2 src/d
setfattr -n user.top -v t src
run_copy
check "setfattr on a SRC directory: DST's has it" \
	grep -qx 'user.dy=0x32' <(getfattr -n user.dy -e hex dst/d 2>/dev/null)
check "setfattr on SRC's root: DST's root has it" \
	grep -qx 'user.top=0x74' <(getfattr -n user.top -e hex dst 2>/dev/null)
same "getfattr of DST's directories equals SRC's" dirs_xattrs
check "no data moved (same inodes)" test "$(inodes)" = "$ino"
rsync_equal "after setfattr"

# an xattr removed
setfattr -x user.dy src/d
run_copy
check "setfattr -x on a SRC directory: DST's loses it" \
	test -z "$(getfattr -n user.dy dst/d 2>/dev/null)"
same "getfattr of DST's directories equals SRC's after -x" dirs_xattrs
rsync_equal "after setfattr -x"

# a default ACL set, then removed
setfacl -d -m u:$NOBODY_UID:rx,g::r-x src/d/sub
run_copy
check "setfacl -d: DST's directory has the default ACL" \
	grep -q "^default:user:$NOBODY_UID:r-x" <(getfacl -n dst/d/sub 2>/dev/null)
same "getfacl of DST's directories equals SRC's" dirs_acls
rsync_equal "after setfacl -d"
setfacl -k src/d/sub
run_copy
check "setfacl -k: DST's default ACL goes too" \
	test -z "$(getfacl -n dst/d/sub 2>/dev/null | grep '^default:')"
same "getfacl of DST's directories equals SRC's after -k" dirs_acls
rsync_equal "after setfacl -k"
check "no data moved through all of that (same inodes)" test "$(inodes)" = "$ino"

# nothing changed: nothing applied (ctime of DST's directories stays)
dirs_ctimes dst >"$LOG/ctimes.before"
sleep 0.05
run_copy
dirs_ctimes dst >"$LOG/ctimes.after"
check "a run with nothing changed applies nothing to DST's directories" \
	cmp -s "$LOG/ctimes.before" "$LOG/ctimes.after"

# an older manifest's rows (no ctime): one metadata pass
setfattr -n user.stray -v x dst/plain
sqlite3 "$M" 'UPDATE dirs SET ctime_ns = NULL' || fail "sqlite3 could not update $M"
run_copy
check "rows with no ctime recorded are applied once (a stray DST xattr goes)" \
	test -z "$(getfattr -n user.stray dst/plain 2>/dev/null)"
rsync_equal "after the pass of older rows"

# --verify: DST's directories changed behind ferry's back
chmod 0700 dst/d/sub
setfattr -n user.dy -v 3 dst/d
touch -m -d '2001-02-03 04:05:06' dst/plain
expect_code 5 "$FERRY" --verify --json --manifest "$M" src dst
show "$LOG/out" 10
tail -n 1 "$LOG/out" >"$LOG/verify.json"
grep '^metadata differs: ' "$LOG/out" | sort >"$LOG/differs"
check "--verify lists each changed DST directory as 'metadata differs: DIR/: PARTS'" \
	test "$(cat "$LOG/differs")" = "$(printf '%s\n' \
		'metadata differs: d/: xattrs' \
		'metadata differs: d/sub/: mode' \
		'metadata differs: plain/: mtime')"
expect_json "$LOG/verify.json" meta_differs 3
run_copy
check "the run after --verify repairs them, data untouched (same inodes)" \
	test "$(inodes)" = "$ino"
rsync_equal "after --verify and a run"
expect_code 0 "$FERRY" --verify --manifest "$M" src dst
check "a verify then lists nothing" test ! -s "$LOG/out"

finish
