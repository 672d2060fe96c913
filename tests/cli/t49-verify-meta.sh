#!/bin/bash
# t49-verify-meta: --verify checks metadata too, and the next run repairs
# only that.
#
# Needs root (chown to other owners). Proves, after a copy and then, in
# DST, a chmod, a chown, a touch -m, a chown -h of a symlink, an xattr
# removed and another added, an ACL entry added, a hard link broken (the
# first name copied over another name: equal content, not a link; and
# one deeper than PATH_MAX left alone), a file
# altered in place (size and mtime kept) and one altered and chmod-ed:
#  - --verify exits 5, lists each metadata-only change as "metadata
#    differs: PATH: PARTS" naming the part (mode, owner, mtime, xattrs,
#    not a link to 'PATH'), and the content changes as "mismatch: PATH"
#    only (content differing wins); untouched files are not listed;
#  - --json says mismatched 2 and meta_differs N apart;
#  - the directory hl/, whose entries the damage changed, reads "hl/:
#    mtime" (directories are verified too);
#  - `ferry status` then shows those rows as pending;
#  - a plain run repairs them: stat (mode, owner, mtime), getfattr -d -m -
#    and getfacl dumps of DST equal SRC's, `rsync -aHAXn -i --numeric-ids`
#    itemizes nothing; it writes no data for the metadata-only ones
#    (--json bytes_copied is the two altered files' sizes) and keeps their
#    inodes (in place: no new copy renamed over them);
#  - --verify then exits 0;
#  - a FIFO whose DST mode and mtime changed: --verify names both, and the
#    next two runs exit 0 (not "not replaced"), repairing it (rsync).
# The xattr and ACL parts (and rsync's -AX) run only when this build
# copies xattrs (their digest is recorded); they say so when skipped.
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) == 0 ]] || skip_all "needs root (chown to other owners)"
need_cmd rsync stat

mkdir -p src/hl src/sub
for f in mode owner mtime content both plain sub/deep-mode xattr acl; do
	head -c 5000 /dev/urandom >"src/$f.bin"
done
head -c 3000 /dev/urandom >src/hl/one
ln src/hl/one src/hl/two
ln -s plain.bin src/sym
# a hard link deeper than PATH_MAX (its first name's DST path is too long
# for one stat): equal, so never listed
make_long_path src/deep
chmod 0640 src/mode.bin src/sub/deep-mode.bin
chown 4321:4321 src/owner.bin

XATTRS=0
if command -v setfattr >/dev/null 2>&1 && command -v getfattr >/dev/null 2>&1 &&
	setfattr -n user.keep -v v1 src/xattr.bin 2>/dev/null; then
	XATTRS=1
fi

# meta_dump DIR: "path type mode uid gid mtime(ns) links" of every entry
# (find reads below PATH_MAX too), and its xattrs (all namespaces), sorted.
meta_dump() {
	(cd "$1" && find . -mindepth 1 -printf '%P %y %m %U %G %T@ %n\n' | sort)
	if ((XACL)); then
		(cd "$1" && getfattr -h -R -d -m - --absolute-names . 2>/dev/null |
			grep -v '^$' | sort)
	fi
}

# listed PREFIX: the paths the last run listed with PREFIX, sorted.
listed() { grep "^$1: " "$LOG/out" | sed "s/^$1: //; s/: .*//" | sort; }

# parts PATH: what the last run said differs in PATH's metadata.
parts() { grep "^metadata differs: $1: " "$LOG/out" | sed 's/^[^:]*: [^:]*: //'; }

expect_code 0 "$FERRY" -q src dst

XACL=0
if ((XATTRS)) && getfattr -n user.keep dst/xattr.bin >/dev/null 2>&1; then
	XACL=1
	setfattr -x user.keep dst/xattr.bin
	setfattr -n user.extra -v new dst/xattr.bin
	if command -v setfacl >/dev/null 2>&1; then
		setfacl -m u:4321:r dst/acl.bin
	else
		XACL=2 # no setfacl: acl.bin stays as copied
	fi
else
	say "this build keeps no xattrs in DST (or SRC holds none): xattr and ACL parts skipped"
fi

# the damage
chmod 0600 dst/mode.bin
chmod 0600 dst/sub/deep-mode.bin
chown 1234:1234 dst/owner.bin
touch -m -d '2001-02-03 04:05:06' dst/mtime.bin
chown -h 1234:1234 dst/sym
rm dst/hl/two
cp -p dst/hl/one dst/hl/two
alter() {
	touch -r "$1" "$LOG/ref"
	printf 'X' | dd of="$1" bs=1 seek=100 conv=notrunc status=none
	touch -r "$LOG/ref" "$1"
}
alter dst/content.bin
alter dst/both.bin
chmod 0700 dst/both.bin
check "the hard link is broken in DST" test \
	"$(stat -c %i dst/hl/one)" != "$(stat -c %i dst/hl/two)"
ino_before=$(stat -c %i dst/mode.bin dst/owner.bin dst/mtime.bin dst/sub/deep-mode.bin)

# one verify (it marks what it found pending): the listing, then --json
expect_code 5 "$FERRY" --verify --json src dst
show "$LOG/out" 30
tail -n 1 "$LOG/out" >"$LOG/verify.json"
# hl/: the rm and cp above moved the DST directory's mtime (verify_dirs.c)
want_meta="hl/
hl/LINK
mode.bin
mtime.bin
owner.bin
sub/deep-mode.bin
sym"
((XACL == 1)) && want_meta+=$'\nacl.bin'
((XACL >= 1)) && want_meta+=$'\nxattr.bin'
want_meta=$(sort <<<"$want_meta")
got_meta=$(listed 'metadata differs' | sed 's|^hl/one$|hl/LINK|; s|^hl/two$|hl/LINK|')
check "verify lists each metadata change as 'metadata differs'" \
	test "$got_meta" = "$want_meta"
check "verify lists the content changes as mismatch, and only them" \
	test "$(listed mismatch)" = "$(printf 'both.bin\ncontent.bin')"
check "no metadata-only file is listed as a mismatch" \
	test -z "$(listed mismatch | grep -v -e '^both.bin$' -e '^content.bin$')"
check "a chmod reads 'mode'" test "$(parts mode.bin)" = mode
check "a chown reads 'owner'" test "$(parts owner.bin)" = owner
check "a touch -m reads 'mtime'" test "$(parts mtime.bin)" = mtime
check "a symlink's chown -h reads 'owner'" test "$(parts sym)" = owner
link_line=$(grep -E "^metadata differs: hl/(one|two): " "$LOG/out")
check "a directory whose entries changed in DST reads 'mtime'" \
	test "$(parts hl/)" = mtime
check "a broken hard link reads \"not a link to 'hl/...'\"" \
	grep -qE "^metadata differs: hl/(one: not a link to 'hl/two'|two: not a link to 'hl/one')\$" <<<"$link_line"
if ((XACL >= 1)); then
	check "a setfattr reads 'xattrs'" grep -q xattrs <<<"$(parts xattr.bin)"
fi
if ((XACL == 1)); then
	check "a setfacl reads 'xattrs'" grep -q xattrs <<<"$(parts acl.bin)"
fi

n_meta=$(wc -l <<<"$want_meta")
n_files=$((n_meta - 1)) # hl/ is a directory row, not a file
expect_json "$LOG/verify.json" mismatched 2
expect_json "$LOG/verify.json" meta_differs "$n_meta"
expect_json "$LOG/verify.json" exit_code 5

expect_code 0 "$FERRY" status src dst
check "status shows the differing rows as pending" \
	grep -qx "pending: $((n_files + 2)) files, [0-9]* bytes" "$LOG/out"

expect_code 0 "$FERRY" --json src dst
want_bytes=$(($(stat -c %s src/content.bin) + $(stat -c %s src/both.bin)))
expect_json "$LOG/out" bytes_copied "$want_bytes"
check "metadata repaired in place (same inodes)" test \
	"$(stat -c %i dst/mode.bin dst/owner.bin dst/mtime.bin dst/sub/deep-mode.bin)" = "$ino_before"
check "the hard link is a link again" test \
	"$(stat -c %i dst/hl/one)" = "$(stat -c %i dst/hl/two)"
meta_dump src >"$LOG/meta.src"
meta_dump dst >"$LOG/meta.dst"
if cmp -s "$LOG/meta.src" "$LOG/meta.dst"; then
	ok "stat and getfattr dumps of DST equal SRC's"
else
	fail "stat and getfattr dumps of DST equal SRC's (< SRC, > DST)"
	diff "$LOG/meta.src" "$LOG/meta.dst" | show -
fi
if ((XACL == 1)); then
	check "getfacl of DST equals SRC's" test \
		"$(cd src && getfacl -Rp --absolute-names . 2>/dev/null)" = \
		"$(cd dst && getfacl -Rp --absolute-names . 2>/dev/null)"
fi
rsync_opts=-aHn
((XACL)) && rsync_opts=-aHAXn
# (rsync cannot open the part deeper than PATH_MAX: meta_dump has it)
rsync "$rsync_opts" -i --numeric-ids --exclude=/deep src/ dst/ >"$LOG/rsync" 2>&1
check "rsync $rsync_opts -i --numeric-ids itemizes nothing" test ! -s "$LOG/rsync"
show "$LOG/rsync"
expect_code 0 "$FERRY" --verify src dst
check "the clean verify lists nothing" test ! -s "$LOG/out"

# A FIFO whose DST mode and mtime were changed: --verify flags it and
# claims DST's node as ferry's (its kind, as the copy records a special),
# so that the next runs repair it instead of refusing it forever (rule 9).
mkdir fsrc
mkfifo fsrc/ff
printf 'x\n' >fsrc/f
expect_code 0 "$FERRY" -q fsrc fdst
chmod 600 fdst/ff
touch -m -d @1000000000 fdst/ff
expect_code 5 "$FERRY" --verify fsrc fdst
check "--verify says the FIFO's mode and mtime differ" \
	test "$(grep '^metadata differs: ff: ' "$LOG/out")" == "metadata differs: ff: mode, mtime"
expect_code 0 "$FERRY" -q fsrc fdst
expect_code 0 "$FERRY" -q fsrc fdst
rsync "$rsync_opts" -i --numeric-ids fsrc/ fdst/ >"$LOG/rsync" 2>&1
check "the FIFO is repaired (rsync $rsync_opts -i itemizes nothing)" test ! -s "$LOG/rsync"
show "$LOG/rsync"
expect_code 0 "$FERRY" --verify fsrc fdst

finish
