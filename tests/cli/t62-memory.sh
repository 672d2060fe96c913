#!/bin/bash
# t62-memory: memory does not grow with the copies in flight (issue 13:
# "memory of -j auto"; issue 11: peak RSS <= 16 MiB with big files in
# flight).
#
# The oracle is the kernel's count of ferry's peak resident set (ru_maxrss,
# GNU time's %M). Each run must exit 0 and leave DST equal to SRC
# (tree_equal), so a run that did little cannot pass for a lean one.
#  A. A tree of 20,000 files (gentree: median 8 KiB, at most 256 KiB, 126
#     of them above 128 KiB) copied with -j 256 and with -j 4: the peak at
#     -j 256 stays within PER_COPY KiB per extra copy of the peak at -j 4.
#     Measured (KiB, MALLOC_ARENA_MAX=1, tmpfs, 3 runs each): main at
#     3ec076f 24,400-26,300 at -j 256 and 8,360-8,420 at -j 4, about 66 KiB
#     per copy (each copier's own 128 KiB buffer, and batches allocated for
#     32 items whatever they held); with the buffer pool (src/bufpool.h),
#     16 KiB of the copier's own and batches of their size 13,200-14,300,
#     about 22 KiB per copy. PER_COPY = 40: main exceeds the bound (18,500
#     KiB) by 6 MiB, the pool stays 4 MiB below it.
#  B. The same small files beside 8 files of 48 MiB, with the default -j
#     (auto): the peak stays <= 16 MiB, issue 11's target with big files in
#     flight. Measured: main 13,000-14,300 KiB, with the pool 11,200-11,400
#     (at -j 256: main 29,900-54,500, the pool 14,400-18,800). main passes
#     B too: it guards the target for what issue 11 adds (chunk streams
#     borrow from the same pool, src/bufpool.h, and must not hold buffers
#     of their own).
# Runs happen with MALLOC_ARENA_MAX=1, as in t16: which threads share which
# glibc arena, keeping freed memory resident, depends on scheduling.
# Skipped in sanitizer builds (shadow memory and quarantine are not ferry's).
. "$(dirname "$0")/lib.sh" || exit 1

need_cmd /usr/bin/time rsync
need_gentree

if [[ -n $SANITIZED ]]; then # lib.sh's
	skip_all "a sanitizer build: its peak RSS is the sanitizer's shadow memory and quarantine, not ferry's own"
fi
if ! /usr/bin/time -f %M -o "$LOG/rss" true 2>/dev/null ||
	[[ ! $(tail -n1 "$LOG/rss") =~ ^[0-9]+$ ]]; then
	skip_all "/usr/bin/time is not GNU time (needs -f %M -o FILE)"
fi

PER_COPY=40     # KiB per copy in flight beyond -j 4 (A)
BIG_BOUND=16384 # KiB (B)

# On a tmpfs when one can be had (as t16): ferry's memory does not depend on
# the file system, and 700 MiB are then written in seconds.
FAST=
if [[ $(id -u) == 0 ]] && mkdir "$T/fast" &&
	mount -t tmpfs -o size=2g,mode=0755 ferry-t62 "$T/fast" 2>"$LOG/mount.err"; then
	FAST=$T/fast
	trap 'cd / && { umount "$FAST" || umount -l "$FAST"; } 2>/dev/null; cleanup' EXIT
elif [[ -d /dev/shm && -w /dev/shm && $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] &&
	(($(df -Pk /dev/shm | awk 'NR == 2 {print $4}') > 2 * 1024 * 1024)) &&
	FAST=$(mktemp -d /dev/shm/ferry-t62.XXXXXX); then
	trap 'chmod -R u+rwX "$FAST" 2>/dev/null; rm -rf "$FAST"; cleanup' EXIT
fi
if [[ -n $FAST ]]; then
	say "working on a tmpfs: $FAST"
	cd "$FAST" || die "cannot enter $FAST"
	mkdir state
	export XDG_STATE_HOME=$PWD/state
fi

# measure KEY DST FERRY-ARGS...: a fresh copy into DST under GNU time;
# RSS[KEY] is its peak resident set in KiB.
declare -A RSS=()
measure() {
	local key=$1 dst=$2
	shift 2
	rm -rf "$dst" "$key.db" "$key.db"-*
	: >"$LOG/rss"
	expect_code 0 env MALLOC_ARENA_MAX=1 /usr/bin/time -f %M -o "$LOG/rss" \
		"$FERRY" -q --manifest "$key.db" "$@" "$dst"
	RSS[$key]=$(tail -n1 "$LOG/rss")
	[[ ${RSS[$key]} =~ ^[0-9]+$ ]] || RSS[$key]=0
	say "$key: peak RSS ${RSS[$key]} KiB"
}

gen_tree src --seed 62 --files 20000 --median 8K --max-size 256K
say "$(find src -type f -size +128k | wc -l) files above 128 KiB"

# A. -j 256 against -j 4
measure j4 dst -j 4 src
tree_equal src dst
measure j256 dst -j 256 src
tree_equal src dst
s=${RSS[j4]} b=${RSS[j256]}
limit=$((s + 252 * PER_COPY))
check "A: peak RSS at -j 256 ($b KiB) <= at -j 4 ($s KiB) + 252 x $PER_COPY KiB = $limit KiB" \
	test "$s" -gt 0 -a "$b" -gt 0 -a "$b" -le "$limit"
rm -rf dst

# B. big files in flight beside the small ones
for i in 1 2 3 4 5 6 7 8; do
	head -c 48M /dev/urandom >"src/big$i" || die "cannot write src/big$i"
done
measure big dst src
tree_equal src dst
b=${RSS[big]}
check "B: peak RSS of -j auto with 8 files of 48 MiB in flight ($b KiB) <= $BIG_BOUND KiB" \
	test "$b" -gt 0 -a "$b" -le "$BIG_BOUND"
finish
