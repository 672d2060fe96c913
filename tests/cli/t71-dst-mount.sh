#!/bin/bash
# t71-dst-mount: a file system mounted below DST gets its own barrier.
#
# DST holds a directory on which a tmpfs is mounted (a second disk or a
# share mounted into the destination tree): ferry writes into it, and
# syncfs of DST's root covers only DST's own file system. Proves, with
# strace -y as the oracle (it names the file each descriptor is):
#  - with the default --durability=batch the barrier runs syncfs on a
#    descriptor of the mounted directory as well as of DST's root, before
#    the files there are marked done;
#  - the copy is identical (diff -r, rsync -c), --verify agrees;
#  - --durability=file runs no syncfs at all (each file's fsync instead).
# Needs root (mount) and strace.
. "$(dirname "$0")/lib.sh" || exit 1
need_strace
[[ $(id -u) == 0 ]] || skip_all "needs root: mounts a tmpfs below DST"

gen_tree src --seed 71 --files 200 --no-links
mkdir -p src/sub
for i in 1 2 3 4 5; do head -c $((i * 4096)) /dev/urandom >"src/sub/f$i"; done

MNTS=()
trap 'cd /; for m in "${MNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m"; done; cleanup' EXIT
# mount_sub DST: a tmpfs on DST/sub
mount_sub() {
	mkdir -p "$1/sub"
	mount -t tmpfs -o size=16m,mode=0755 "ferry-t71" "$1/sub" 2>"$LOG/mount.err" ||
		skip_all "cannot mount a tmpfs: $(head -c 200 "$LOG/mount.err")"
	MNTS+=("$T/$1/sub")
}

mount_sub dst
expect_code 0 env "$(no_leak_check_env)" strace -f -y -e trace=syncfs -o "$LOG/strace" "$FERRY" -q src dst
tree_equal src dst
expect_code 0 "$FERRY" --verify src dst
check "batch: a syncfs of DST's root" grep -qE "syncfs\([0-9]+<$T/dst>\)" "$LOG/strace"
check "batch: a syncfs of the tmpfs mounted on DST/sub" \
	grep -qE "syncfs\([0-9]+<$T/dst/sub>\)" "$LOG/strace"
grep syncfs "$LOG/strace" | sed 's/^/#   /' | head -5

mount_sub dst-file
expect_code 0 env "$(no_leak_check_env)" strace -f -y -e trace=syncfs -o "$LOG/strace" "$FERRY" -q --durability=file src dst-file
tree_equal src dst-file
check "--durability=file: no syncfs" test -z "$(grep -E '^[0-9]+ +syncfs' "$LOG/strace")"
finish
