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
#  - the finish, which makes empty directories and sets directory times
#    there after the last barrier, runs syncfs on the mounted directory
#    after its last directory time is set (a power cut must not lose what
#    the manifest then calls applied);
#  - the copy is identical (diff -r, rsync -c), --verify agrees;
#  - --durability=file runs no syncfs at all (each file's fsync instead).
# Needs root (mount) and strace.
. "$(dirname "$0")/lib.sh" || exit 1
need_strace
[[ $(id -u) == 0 ]] || skip_all "needs root: mounts a tmpfs below DST"

gen_tree src --seed 71 --files 200 --no-links
mkdir -p src/sub/empty/deeper
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

# DST with a space: mountinfo escapes it (\040)
D="dst a"
mount_sub "$D"
expect_code 0 env "$(no_leak_check_env)" strace -f -y -e trace=syncfs,utimensat -o "$LOG/strace" "$FERRY" -q src "$D"
tree_equal src "$D"
expect_code 0 "$FERRY" --verify src "$D"
check "batch: a syncfs of DST's root" grep -qE "syncfs\([0-9]+<$T/$D>\)" "$LOG/strace"
check "batch: a syncfs of the tmpfs mounted on DST/sub" \
	grep -qE "syncfs\([0-9]+<$T/$D/sub>\)" "$LOG/strace"
grep syncfs "$LOG/strace" | sed 's/^/#   /' | head -5
# line numbers (strace's order is time order): the last time set on a
# directory of the tmpfs, the last syncfs of it
last_time=$(grep -nE "utimensat\([0-9]+<$T/$D/sub(/empty(/deeper)?)?>, NULL" "$LOG/strace" | tail -1 | cut -d: -f1)
last_sync=$(grep -nE "syncfs\([0-9]+<$T/$D/sub>\)" "$LOG/strace" | tail -1 | cut -d: -f1)
check "finish: a syncfs of the mounted tmpfs after its last directory time (lines ${last_time:-none} < ${last_sync:-none})" \
	test -n "$last_time" -a -n "$last_sync" -a "${last_sync:-0}" -gt "${last_time:-0}"

mount_sub dst-file
expect_code 0 env "$(no_leak_check_env)" strace -f -y -e trace=syncfs -o "$LOG/strace" "$FERRY" -q --durability=file src dst-file
tree_equal src dst-file
check "--durability=file: no syncfs" test -z "$(grep -E '^[0-9]+ +syncfs' "$LOG/strace")"
finish
