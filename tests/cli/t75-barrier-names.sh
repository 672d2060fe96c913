#!/bin/bash
# t75-barrier-names: the barrier fsyncs each directory only where the
# syncfs before it and one fsync do not make them all durable.
#
# DST is, in turn, XFS, ext4 with a journal, ext4 without one (each on a
# loop image) and a tmpfs. Proves, with strace -y (it names each
# descriptor) and power cuts as the oracles:
#  A. on XFS and ext4 with or without a journal, every sync of DST (each
#     barrier's, the finish's) runs syncfs on DST (twice without a
#     journal) and then, in the same thread, fsyncs DST's root, and no
#     other directory is fsynced (on XFS and journaled ext4 the syncfs
#     commits every new name; without a journal the first writes every
#     block and the second flushes after them; that fsync reports a file
#     system that failed, as syncfs may not); on a
#     tmpfs (a file system of no such kind, as FUSE, NFS, 9p) every
#     directory that received files is fsynced; the copy is identical
#     (diff -r, rsync -c) and --verify agrees;
#  B. a tmpfs mounted below an XFS DST keeps the fsyncs of its own
#     directories while the XFS part has only its root's; a read-only
#     tmpfs mounted below DST does not fail the run (nothing of ferry's
#     is there); F: with every fsync failing (EIO) the run fails, no row
#     is done, and the next run completes;
#  C. on XFS and journaled ext4: a crash right after the first COMMIT of
#     done marks (FERRY_CRASH=after_done_commit:1), then the file system
#     cut without a log flush (xfs_io -x -c shutdown, which ext4 answers
#     too: a power cut), then mounted again: every row the manifest calls
#     done is in DST with its size and hash (the manifest lives on another
#     file system); the next run completes. With the barrier's syncfs and
#     fsyncs left out these cuts lose every row (seen). Not on ext4
#     without a journal: a loop device's writes land in the host's page
#     cache, so a cut there cannot tell a missing flush.
# Needs root, loop devices, mkfs.xfs, mkfs.ext4, xfs_io, strace.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_strace
need_test_hooks
need_cmd sqlite3 xxhsum xxd rsync losetup mkfs.xfs mkfs.ext4 xfs_io
need_root "mounts loop images"
grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null ||
	skip_all "the kernel has no XFS"

gen_tree src --seed 75 --files 300 --no-links
say "source: $(find src -type f | wc -l) files in $(find src -type d | wc -l) directories"

# mkfs_mount KIND: a loop image of KIND (xfs, ext4j: ext4 with a journal,
# ext4n: without) mounted on $T/m-KIND; its loop device in LOOP_KIND.
mkfs_mount() {
	local kind=$1 img=$T/$1.img loop
	truncate -s 320M "$img" || die "cannot create $img"
	case $kind in
	xfs) mkfs.xfs -q -f "$img" ;;
	ext4j) mkfs.ext4 -q -F "$img" ;;
	ext4n) mkfs.ext4 -q -F -O ^has_journal "$img" ;;
	esac 2>"$LOG/mkfs.err" || skip_all "mkfs $kind failed: $(head -c 200 "$LOG/mkfs.err")"
	loop=$(losetup --find --show "$img" 2>"$LOG/losetup.err") ||
		skip_all "no loop device: $(head -c 200 "$LOG/losetup.err")"
	T2_LOOPS+=("$loop")
	mkdir -p "$T/m-$kind"
	mount "$loop" "$T/m-$kind" 2>"$LOG/mount.err" ||
		skip_all "cannot mount $kind: $(head -c 200 "$LOG/mount.err")"
	track_mount "$T/m-$kind"
	printf -v "LOOP_$kind" '%s' "$loop"
}

# dir_fsyncs TRACE ROOT: the directories at or below ROOT that TRACE
# (strace -f -y) shows fsynced or fdatasynced, one per line, sorted (a
# call another thread's interrupted ends its line with <unfinished ...>).
dir_fsyncs() {
	sed -nE 's/^[0-9]+ +f(data)?sync\([0-9]+<([^>]*)>.*/\2/p' "$1" |
		while IFS= read -r p; do
			[[ ($p == "$2" || $p == "$2"/*) && -d $p ]] && printf '%s\n' "$p"
		done | sort -u
}

# dirs_with_files DIR: DIR's directories that hold a file, sorted.
dirs_with_files() {
	find "$1" -type f -printf '%h\n' | sort -u
}

# sync_shape TRACE DIR: per thread, each run of syncfs calls on DIR and
# what ends it: "Nf" for N syncfs then an fsync of DIR itself, "N-" for N
# with none after them in that thread; one per line, in thread order.
sync_shape() {
	awk -v d="<$2>" '
		/^[0-9]+ +(syncfs|fsync)\(/ && index($0, d) {
			call = $2; sub(/\(.*/, "", call)
			if (call == "syncfs") { n[$1]++; next }
			print n[$1] + 0 "f"; n[$1] = 0
		}
		END { for (p in n) if (n[p]) print n[p] "-" }' "$1"
}

# traced_copy DST LABEL: the default run under strace into DST, checked.
traced_copy() {
	expect_code 0 env "$(no_leak_check_env)" strace -f -qq -y -o "$LOG/$2.trace" \
		-e trace=fsync,fdatasync,syncfs "$FERRY" -q src "$1" || return 1
	tree_equal src "$1"
	expect_code 0 "$FERRY" --verify src "$1"
	check "$2: a syncfs of DST" grep -qE "syncfs\([0-9]+<$1>" "$LOG/$2.trace"
}

# A. the four file systems
for kind in xfs ext4j ext4n tmpfs; do
	if [[ $kind == tmpfs ]]; then
		mkdir -p "$T/m-tmpfs"
		mount -t tmpfs -o size=64m,mode=0755 ferry-t75 "$T/m-tmpfs" 2>"$LOG/mount.err" ||
			die "cannot mount a tmpfs: $(head -c 200 "$LOG/mount.err")"
		track_mount "$T/m-tmpfs"
	else
		mkfs_mount "$kind"
	fi
	d=$T/m-$kind/dst
	traced_copy "$d" "A-$kind" || continue
	dir_fsyncs "$LOG/A-$kind.trace" "$d" >"$LOG/fsynced"
	if [[ $kind == tmpfs ]]; then
		dirs_with_files "$d" >"$LOG/want"
		comm -23 "$LOG/want" "$LOG/fsynced" >"$LOG/missing"
		check "A-$kind: every directory that received files is fsynced ($(wc -l <"$LOG/want") directories, $(wc -l <"$LOG/missing") not)" \
			test ! -s "$LOG/missing"
		show "$LOG/missing" 5
	else
		check "A-$kind: DST's root is fsynced" grep -qxF "$d" "$LOG/fsynced"
		grep -vxF "$d" "$LOG/fsynced" >"$LOG/others"
		check "A-$kind: no other DST directory is fsynced ($(wc -l <"$LOG/others") are)" \
			test ! -s "$LOG/others"
		show "$LOG/others" 5
		# each sync of DST (a barrier's, the finish's) is its syncfs, a
		# second one without a journal, then the fsync of its root, in
		# the thread that runs it
		want=1f
		[[ $kind == ext4n ]] && want=2f
		sync_shape "$LOG/A-$kind.trace" "$d" >"$LOG/shape"
		check "A-$kind: every sync of DST is $want ($(sort "$LOG/shape" | uniq -c | tr -s ' \n' ' '))" \
			test -s "$LOG/shape" -a -z "$(grep -vx "$want" "$LOG/shape")"
		check "A-$kind: ... at least 2 of them (a barrier's and the finish's)" \
			test "$(wc -l <"$LOG/shape")" -ge 2
	fi
done

# B. a tmpfs below an XFS DST
d=$T/m-xfs/dstB
mkdir -p "$d/sub"
mount -t tmpfs -o size=32m,mode=0755 ferry-t75 "$d/sub" 2>"$LOG/mount.err" ||
	die "cannot mount a tmpfs: $(head -c 200 "$LOG/mount.err")"
track_mount "$d/sub"
mkdir -p src/sub/x src/sub/y
for i in 1 2 3; do
	echo "x$i" >"src/sub/x/f$i"
	echo "y$i" >"src/sub/y/f$i"
done
if traced_copy "$d" "B"; then
	dir_fsyncs "$LOG/B.trace" "$d" >"$LOG/fsynced"
	grep -v "^$d/sub\(/\|$\)" "$LOG/fsynced" >"$LOG/on-xfs"
	check "B: on the XFS part only DST's root is fsynced ($(tr '\n' ' ' <"$LOG/on-xfs"))" \
		test "$(cat "$LOG/on-xfs")" = "$d"
	check "B: the tmpfs's directories that received files are fsynced" \
		grep -qx "$d/sub/x" "$LOG/fsynced"
	check "B: ... both of them" grep -qx "$d/sub/y" "$LOG/fsynced"
	check "B: a syncfs of the tmpfs" grep -qE "syncfs\([0-9]+<$d/sub(/[xy])?>" "$LOG/B.trace"
fi
umount "$d/sub" || die "cannot unmount the tmpfs"
rm -rf src/sub

# B2. a read-only mount below DST (an archive, an ISO) holds nothing ferry
# wrote: the end of the run does not count it as a failed file system
d=$T/m-xfs/dstR
mkdir -p "$d/ro"
mount -t tmpfs -o ro,size=1m ferry-t75ro "$d/ro" 2>"$LOG/mount.err" ||
	die "cannot mount a read-only tmpfs: $(head -c 200 "$LOG/mount.err")"
track_mount "$d/ro"
expect_code 0 "$FERRY" -q src "$d"
check "B2: the copy beside the read-only mount is whole (diff -r)" diff -r -x ro src "$d"
umount "$d/ro" || die "cannot unmount the read-only tmpfs"

# F. the fsync after the syncfs fails (EIO, every call: a file system that
# failed, whose syncfs said nothing): no row is done, the next run copies
rm -rf "$T/m-xfs/dstF"
M=$T/f.db
run env FERRY_FAULT=fsync:0:5 "$FERRY" -q --manifest "$M" src "$T/m-xfs/dstF"
check "F: a failing fsync after the syncfs fails the run (exit $RC)" test "$RC" != 0
manifest_invariant "$M" "$T/m-xfs/dstF" "F"
check "F: no row is done ($INV_DONE)" test "$INV_DONE" = 0
expect_code 0 "$FERRY" -q --manifest "$M" src "$T/m-xfs/dstF" && tree_equal src "$T/m-xfs/dstF"

# C. a power cut right after the first done marks' COMMIT
for kind in xfs ext4j; do
	mnt=$T/m-$kind d=$T/m-$kind/dstC loop_var=LOOP_$kind
	M=$T/c-$kind.db
	run env "$(crash_env)" FERRY_CRASH=after_done_commit:1 "$FERRY" -q --manifest "$M" src "$d"
	check "C $kind: the run crashed right after the done marks' COMMIT (exit 86, got $RC)" test "$RC" = 86
	xfs_io -x -c shutdown "$mnt" 2>"$LOG/xfs_io.err" ||
		die "xfs_io shutdown of $kind: $(cat "$LOG/xfs_io.err")"
	umount "$mnt" 2>"$LOG/umount.err" || die "umount after the cut: $(cat "$LOG/umount.err")"
	mount "${!loop_var}" "$mnt" 2>"$LOG/mount.err" || die "mount after the cut: $(cat "$LOG/mount.err")"
	manifest_invariant "$M" "$d" "C $kind: after the power cut"
	check "C $kind: some rows were done before the cut ($INV_DONE)" test "$INV_DONE" -gt 0
	expect_code 0 "$FERRY" -q --manifest "$M" src "$d" && tree_equal src "$d"
done
finish
