#!/bin/bash
# t22-dst-full: a full destination stops the run with one clear message, and
# the same command completes the job once there is space again.
#
# DST is a small tmpfs (mount -t tmpfs -o size=8m), a real ENOSPC without
# mocks. Proves, with -q (only errors on stderr):
#  A. a source larger than DST: exit 11, exactly one "ferry: " line saying
#     the destination is full (not one error per file), no file counted as
#     failed, the manifest invariant holds; after a remount with more space
#     the same command completes (exit 0), DST == SRC, --verify is clean;
#  B. the same with a filler file that takes the space, then is deleted;
#  C. the space runs out in the middle of the copy (strace holds ferry's
#     first rename, or SIGSTOP freezes it, while the rest of DST is filled):
#     exit 11 and one message, nothing failed, no temp file left, the
#     invariant holds; after the filler is deleted the same command completes;
#  D. a source that fits only because a file is sparse (64 MiB logical, a few
#     KiB of data) or hardlinked (three names, one copy) is copied, holes and
#     links kept (this found that the free-space check refused it; fixed).
# Needs root (mount); skipped with the reason otherwise.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd fallocate df
need_root "mounts a small tmpfs as the destination"

mkdir mnt
if ! mount -t tmpfs -o size=8m,mode=0755 ferry-full "$T/mnt" 2>"$LOG/mount.err"; then
	skip_all "cannot mount a tmpfs: $(head -c 200 "$LOG/mount.err")"
fi
track_mount "$T/mnt"

# remount SIZE: resize the tmpfs on mnt (its files stay).
remount() {
	mount -o "remount,size=$1" "$T/mnt" || die "cannot remount the tmpfs to $1"
}

# avail: bytes free on mnt.
avail() { df -B1 --output=avail "$T/mnt" | tail -n1 | tr -d ' '; }

# expect_full LABEL SRC DST: the last run stopped for a full destination.
expect_full() {
	local label=$1 src=$2 dst=$3
	if [[ $RC == 11 ]]; then
		ok "$label: exit 11"
	else
		fail "$label: exit 11 (got $RC)"
		show "$LOG/err"
	fi
	no_sanitizer_report "$LOG/err"
	stderr_is_one_error
	check "$label: the message says the destination is full" grep -qiE 'full|free' "$LOG/err"
	check "$label: no file counted as failed" test "$(status_count "$src" "$dst" failed)" = 0
	manifest_invariant "$(manifest_path "$src" "$dst")" "$dst" "$label"
}

gen_tree src --seed 2222 --files 300 --median 32K --max-size 1M
say "source: $(du -sh --apparent-size src | cut -f1) in $(find src -type f | wc -l) files"

# A. bigger than the file system
run "$FERRY" -q src mnt/a
expect_full "A: source larger than DST" src mnt/a
remount 64m
final_state src mnt/a
rm -rf mnt/a

# B. a filler takes the space
remount 24m
fallocate -l 20M mnt/filler || die "fallocate failed"
run "$FERRY" -q src mnt/b
expect_full "B: DST filled by another file" src mnt/b
rm mnt/filler
final_state src mnt/b
rm -rf mnt/b

# B2. no inode left: even the name probe (src/names.c) cannot create its
# files. What it then "learned" (nothing refused, case-sensitive) must not
# be kept in the manifest: on a case-insensitive DST that would lose files
# for good (found by review). Once there is room, a run probes and keeps it.
remount 64m
mkdir mnt/b2
used=$(df --output=iused "$T/mnt" | tail -n1 | tr -d ' ')
mount -o "remount,nr_inodes=$used" "$T/mnt" || die "cannot remount with nr_inodes=$used"
run "$FERRY" -q src mnt/b2
expect_full "B2: no inode left in DST" src mnt/b2
check "B2: the failed probe's rules are not kept" \
	test "$(sqlite3 -readonly "$(manifest_path src mnt/b2)" \
		"SELECT count(*) FROM meta WHERE key = 'dst_names'")" = 0
mount -o "remount,nr_inodes=100000" "$T/mnt" || die "cannot remount with more inodes"
final_state src mnt/b2
check "B2: with room, the probe's rules are kept" \
	test "$(sqlite3 -readonly "$(manifest_path src mnt/b2)" \
		"SELECT count(*) FROM meta WHERE key = 'dst_names'")" = 1
rm -rf mnt/b2

# C. the space runs out while copying: ferry copies with one worker, whose
# first rename into place strace holds for 2 s (or, without strace, ferry is
# frozen with SIGSTOP after its first file) while the test fills DST
gen_tree srcC --seed 2223 --files "$(pick 2000 1000 5000)" --median 4K --max-size 64K
remount 64m
fill_dst() {
	fallocate -l "$(($(avail) - 4096))" mnt/filler 2>/dev/null ||
		fallocate -l "$(($(avail) - 65536))" mnt/filler || die "fallocate failed"
}
hit=0
for attempt in 1 2 3; do
	rm -rf mnt/c mnt/filler "$XDG_STATE_HOME/ferry"
	if have_strace; then
		if ! HOLD_US=2000000 held_run '' rename,renameat,renameat2 1 "$FERRY" -q -j 1 srcC mnt/c; then
			bg_wait
			say "C: attempt $attempt: no rename was held (exit $BG_RC)"
			continue
		fi
		fill_dst
		say "C: held ferry's first rename, filled DST ($(avail) bytes left)"
	else
		bg "$FERRY" -q -j 1 srcC mnt/c
		if ! wait_until 60 started_copying mnt/c; then
			bg_wait
			fail "C: ferry started copying within 60 s (exit $BG_RC)"
			break
		fi
		kill -STOP "$BG_PID"
		if ! is_stopped "$BG_PID" && ! wait_until 5 is_stopped "$BG_PID"; then
			bg_wait
			say "C: attempt $attempt: the run ended before it could be frozen (exit $BG_RC)"
			continue
		fi
		fill_dst
		say "C: froze ferry after $(find mnt/c -type f | wc -l) files, filled DST ($(avail) bytes left)"
		kill -CONT "$BG_PID"
	fi
	bg_wait
	if [[ $BG_RC == 0 ]]; then
		say "C: attempt $attempt: the copy was done before DST was full"
		continue
	fi
	hit=1
	break
done
if ((hit)); then
	grep -v '^strace: ' "$LOG/bg.err" >"$LOG/err" # strace's own notes aside
	RC=$BG_RC
	expect_full "C: DST full in the middle of the copy" srcC mnt/c
	no_temp_files mnt/c
	rm mnt/filler
	final_state srcC mnt/c
else
	fail "C: DST became full in the middle of the copy (3 attempts)"
fi
rm -rf mnt/c mnt/filler

# D. what fits: a sparse file, hardlinks
remount 8m
mkdir -p srcD
truncate -s 64M srcD/sparse.img
printf 'data in the middle' | dd of=srcD/sparse.img bs=1 seek=$((32 << 20)) conv=notrunc status=none
head -c $((3 << 20)) /dev/urandom >srcD/three-names
ln srcD/three-names srcD/second-name
ln srcD/three-names srcD/third-name
run "$FERRY" -q srcD mnt/d
check "D: a 64 MiB sparse file and a 3 MiB file with three names fit in 8 MiB (exit $RC)" \
	test "$RC" = 0
show "$LOG/err" 3
tree_equal srcD mnt/d
hardlinks_equal srcD mnt/d
sparse_kept srcD mnt/d sparse.img
finish
