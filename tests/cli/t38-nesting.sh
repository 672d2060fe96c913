#!/bin/bash
# t38-nesting: DST inside SRC (or SRC inside DST) under any name, and
# ferry's own files inside SRC or DST.
#
# ferry decides by identity (device and inode), not by the spelling of a
# path. Proves:
#  - SRC inside DST by path: exit 2 with a message, nothing written into
#    SRC (a copy of SRC's "sub/x" would land on SRC's own "x");
#  - DST reached through a symlink into SRC, and DST the same directory as
#    SRC through a symlink: exit 2, nothing copied;
#  - as root, with bind mounts: DST a bind mount of a directory of SRC, a
#    bind mount of DST inside SRC (each run used to nest another copy), and
#    SRC a bind mount of a directory of DST: exit 2 with a message naming
#    both, before anything is written (find: SRC and DST unchanged), also
#    on a second run; and with an empty mount table (nothing to see before
#    the run), the scan itself stops at DST's root inside SRC: exit 2;
#  - a --manifest inside SRC, named through a symlink: the run exits 0, and
#    neither the manifest nor its -wal, -shm, -journal or lock file arrives
#    in DST (find), and a re-run copies nothing (the live manifest used to
#    be copied, torn, on every run); the same for the default manifest
#    when XDG_STATE_HOME lies inside SRC;
#  - a manifest inside DST, where SRC once had a file of that name: a run
#    with --delete keeps it (the row is dropped with a warning) and the
#    manifest still works.
. "$(dirname "$0")/lib.sh" || exit 1

# listing DIR: every entry with type, size and mtime, for "unchanged".
listing() { find "$1" -printf '%P %y %s %T@\n' | sort; }

# unchanged WHAT DIR BEFORE-FILE: DIR lists as it did.
unchanged() {
	listing "$2" >"$LOG/after"
	if cmp -s "$3" "$LOG/after"; then
		ok "$1: $2 unchanged"
	else
		fail "$1: $2 unchanged (< before, > after)"
		diff "$3" "$LOG/after" | show -
	fi
}

# refused WHAT SRC DST: ferry exits 2, says why, and changes neither tree.
refused() {
	local what=$1 src=$2 dst=$3
	listing "$src" >"$LOG/src.before"
	[[ -e $dst ]] && listing "$dst" >"$LOG/dst.before"
	expect_code 2 "$FERRY" -q --manifest "$T/m-$RANDOM.db" "$src" "$dst"
	check "$what: the message says inside" grep -q 'inside' "$LOG/err"
	show "$LOG/err" 3
	unchanged "$what" "$src" "$LOG/src.before"
	if [[ -e $LOG/dst.before ]]; then
		unchanged "$what" "$dst" "$LOG/dst.before"
		rm -f "$LOG/dst.before"
	fi
}

make_src() {
	mkdir -p "$1/sub/deeper" "$1/other"
	printf 'x\n' >"$1/x"
	printf 'sub x\n' >"$1/sub/x"
	printf 'deep\n' >"$1/sub/deeper/f"
	printf 'other\n' >"$1/other/o"
}

# ---- by path and through symlinks --------------------------------------

mkdir outer
make_src outer/sub # SRC outer/sub holds sub/x: DST outer's sub/x is SRC's x
refused "SRC inside DST" outer/sub outer

make_src s1
ln -s s1/sub to-sub
refused "DST through a symlink into SRC" s1 to-sub
refused "new DST below a symlink into SRC" s1 to-sub/new
ln -s s1 same
refused "DST the same as SRC through a symlink" s1 same

# ---- bind mounts --------------------------------------------------------

MOUNTS=()
unmount_all() {
	local i
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		umount "${MOUNTS[i]}" 2>/dev/null
	done
	MOUNTS=()
}
trap 'unmount_all; cleanup' EXIT

bind() {
	mkdir -p "$2"
	mount --bind "$1" "$2" || return 1
	MOUNTS+=("$T/$2")
}

if [[ $(id -u) != 0 ]]; then
	say "SKIP the bind mount cases: they need root"
elif ! mkdir -p probe.a && bind probe.a probe.b; then
	say "SKIP the bind mount cases: mount --bind failed"
else
	make_src b1
	bind b1/sub bdst
	refused "DST a bind mount of SRC's sub" b1 bdst
	refused "DST a bind mount of SRC's sub, second run" b1 bdst
	refused "new DST in a bind mount of SRC's sub" b1 bdst/new

	make_src b2
	mkdir b2dst
	bind b2dst b2/mnt
	refused "a bind mount of DST inside SRC" b2 b2dst
	refused "a bind mount of DST inside SRC, second run" b2 b2dst
	check "no copy nested in DST" test ! -e b2dst/mnt

	mkdir b3dst
	make_src b3dst/inner
	bind b3dst/inner bsrc
	refused "SRC a bind mount of DST's inner" bsrc b3dst
	unmount_all

	# With an empty mount table (/dev/null bound over this process's
	# /proc/PID/mountinfo, in a mount namespace of its own) the checks
	# before the run cannot see a bind mount; the scan still finds DST's
	# root inside SRC (by dev:ino) and stops.
	if ! command -v unshare >/dev/null 2>&1; then
		say "SKIP the scan's own check: needs unshare"
	else
		make_src b4
		mkdir b4dst b4/mnt
		unshare -m --propagation private "$BASH" -c '
			mount --bind b4dst b4/mnt &&
			mount --bind /dev/null /proc/$$/mountinfo &&
			exec "$@"' sh "$FERRY" -q --manifest "$T/m-b4.db" b4 b4dst \
			>"$LOG/out" 2>"$LOG/err"
		RC=$?
		check "no mount table, a bind mount of DST inside SRC: exit 2 (got $RC)" \
			test "$RC" = 2
		check "no mount table: the scan's message (under another name)" \
			grep -q 'inside.*under another name' "$LOG/err"
		show "$LOG/err" 3
		check "no mount table: nothing of DST was listed or nested" \
			test ! -e b4dst/mnt
	fi
fi

# ---- ferry's own files --------------------------------------------------

# own_files DST: names of manifest files, lock and temps that arrived.
own_files() {
	find "$1" \( -name 'job.db*' -o -name '*.ferry-part' -o -name '*.lock' \
		-o -name '*.db' -o -name '*.db-*' \) -printf '%P\n' | sort
}

make_src m1
mkdir m1/state
ln -s m1/state state-link
expect_code 0 "$FERRY" -q --json --manifest state-link/job.db m1 m1dst
check "the manifest exists inside SRC" test -f m1/state/job.db
own_files m1dst >"$LOG/own"
check "manifest inside SRC: none of its files is in DST" test ! -s "$LOG/own"
show "$LOG/own"
check "manifest inside SRC: its directory is copied" test -d m1dst/state
expect_code 0 "$FERRY" -q --json --manifest state-link/job.db m1 m1dst
expect_json "$LOG/out" files_copied 0
own_files m1dst >"$LOG/own"
check "manifest inside SRC, re-run: none of its files is in DST" test ! -s "$LOG/own"
tree_equal m1/sub m1dst/sub >/dev/null ||
	fail "the rest of SRC is copied"

# the default manifest, under an XDG_STATE_HOME inside SRC
make_src m2
mkdir m2/xdg
XDG_STATE_HOME=$T/m2/xdg expect_code 0 "$FERRY" -q --json m2 m2dst
check "the default manifest is inside SRC" \
	test -n "$(find m2/xdg -name '*.db' -print -quit)"
XDG_STATE_HOME=$T/m2/xdg expect_code 0 "$FERRY" -q --json m2 m2dst
expect_json "$LOG/out" files_copied 0
find m2dst/xdg -type f -printf '%P\n' >"$LOG/own"
check "default manifest inside SRC: none of its files is in DST" test ! -s "$LOG/own"
show "$LOG/own"

# a manifest inside DST, under a name SRC once had
make_src m3
printf 'a user file\n' >m3/.ferry.db
expect_code 0 "$FERRY" -q --manifest "$T/m3.db" m3 m3dst
check "SRC's .ferry.db is copied" cmp m3/.ferry.db m3dst/.ferry.db
rm m3/.ferry.db
mv "$T/m3.db" m3dst/.ferry.db # the user keeps the manifest with the copy
rm -f "$T"/m3.db-* "$T/m3.db.lock"
expect_code 0 "$FERRY" -q --delete --manifest m3dst/.ferry.db m3 m3dst
check "manifest inside DST: --delete kept it" test -f m3dst/.ferry.db
expect_code 0 "$FERRY" status --manifest m3dst/.ferry.db
check "manifest inside DST: it is still a manifest, with its rows" \
	grep -q '^done: [1-9]' "$LOG/out"
expect_code 0 "$FERRY" -q --delete --json --manifest m3dst/.ferry.db m3 m3dst
expect_json "$LOG/out" files_copied 0
check "manifest inside DST: kept on the second run too" test -f m3dst/.ferry.db

finish
