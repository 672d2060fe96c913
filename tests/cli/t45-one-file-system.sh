#!/bin/bash
# t45-one-file-system: -x/--one-file-system does not cross mount points in
# SRC (issue 10), as rsync -x and cp -x: the mount point directory itself
# is made in DST, empty.
#
# A tmpfs is mounted inside SRC (root; unmounted by the trap, also on a
# failure). Oracles: find's listing of what cp -ax and rsync -ax make of
# the same SRC. Proves:
#  - without -x the tmpfs's files are copied (the default crosses, as cp -a
#    and rsync -a do);
#  - with -x, DST has the mount point directory, empty, and everything of
#    SRC's own file system, nested directories included: the same names
#    as cp -ax and rsync -ax make; a re-run copies nothing;
#  - a second mount deeper inside SRC is left out the same way, and a
#    mount below the tmpfs is never reached.
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) == 0 ]] || skip_all "needs root (mounts a tmpfs inside SRC)"
need_cmd rsync

MOUNTS=()
unmount_all() {
	local i
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		umount "${MOUNTS[i]}" 2>/dev/null
	done
	MOUNTS=()
}
trap 'unmount_all; cleanup' EXIT

tmpfs_at() {
	mkdir -p "$1"
	mount -t tmpfs -o size=4m tmpfs "$1" || return 1
	MOUNTS+=("$T/$1")
}

# names DIR: the entries below DIR with their types, sorted.
names() {
	(cd "$1" && find . -mindepth 1 -printf '%P %y\n' | sort)
}

# same_names A B WHAT
same_names() {
	names "$1" >"$LOG/names.a"
	names "$2" >"$LOG/names.b"
	if cmp -s "$LOG/names.a" "$LOG/names.b"; then
		ok "$3"
	else
		fail "$3 (< $1, > $2)"
		diff "$LOG/names.a" "$LOG/names.b" | show -
	fi
}

mkdir -p src/a/b src/deep/er
printf 'a\n' >src/a/f
printf 'b\n' >src/a/b/g
tmpfs_at src/mnt || skip_all "mount -t tmpfs failed"
mkdir -p src/mnt/inner
printf 'on tmpfs\n' >src/mnt/t
printf 'deeper\n' >src/mnt/inner/u
tmpfs_at src/deep/er/m2 || die "the second tmpfs did not mount"
printf 'm2\n' >src/deep/er/m2/v
tmpfs_at src/mnt/inner/m3 || die "the third tmpfs did not mount"
printf 'm3\n' >src/mnt/inner/m3/w

expect_code 0 "$FERRY" -q src all
check "without -x: the tmpfs's files are copied" test -f all/mnt/t -a -f all/mnt/inner/m3/w

expect_code 0 "$FERRY" --json -x src dst
tail -n1 "$LOG/out" >"$LOG/summary"
expect_json "$LOG/summary" files_copied 2
check "-x: the mount point is a directory in DST" test -d dst/mnt -a -d dst/deep/er/m2
check "-x: the mount points are empty in DST" \
	test -z "$(ls -A dst/mnt)" -a -z "$(ls -A dst/deep/er/m2)"
check "-x: SRC's own files arrive" cmp -s src/a/b/g dst/a/b/g
cp -ax src cpx
same_names cpx dst "-x: DST has the names cp -ax makes"
rsync -ax src/ rsx/
same_names rsx dst "-x: DST has the names rsync -ax makes"

expect_code 0 "$FERRY" --json --one-file-system src dst
tail -n1 "$LOG/out" >"$LOG/summary"
expect_json "$LOG/summary" files_copied 0

unmount_all
finish
