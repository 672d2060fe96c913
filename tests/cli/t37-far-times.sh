#!/bin/bash
# t37-far-times: modification times outside 1677-2262 survive a copy.
#
# Nanoseconds since 1970 in 64 bits end on 2262-04-11 (and begin in 1677);
# ext4 holds times up to 2446-05-10 and back to 1901-12-13, tmpfs and btrfs
# far beyond. Proves, for regular files, a symlink (touch -h) and
# directories:
#  - times after 2262 (2300 with nanoseconds, ext4's last day 2446-05-10),
#    before 1970 (1960, with nanoseconds) and in 1901 arrive in DST as they
#    are in SRC: find's %T@ (seconds and nanoseconds) and stat's %y agree;
#  - a re-run copies nothing (--json files_copied 0): the manifest keeps
#    those times as they are, so change detection still matches them;
#  - as root, on a tmpfs (which holds any 64-bit second): the year 1000 and
#    the year 3000 survive the same way, and a re-run copies nothing.
. "$(dirname "$0")/lib.sh" || exit 1

# times DIR: "path type %T@ %y" of every entry, DIR included, sorted.
times() {
	(cd "$1" && find . -printf '%P %y %T@ ' -exec stat -c '%y' {} \;) | sort
}

# same_times A B WHAT: the times of A's and B's entries are the same.
same_times() {
	times "$1" >"$LOG/times.a"
	times "$2" >"$LOG/times.b"
	if cmp -s "$LOG/times.a" "$LOG/times.b"; then
		ok "$3: SRC and DST entries have the same mtimes"
	else
		fail "$3: SRC and DST entries have the same mtimes (< SRC, > DST)"
		diff "$LOG/times.a" "$LOG/times.b" | show -
	fi
}

# make_far_tree DIR DATE...: files, a symlink and directories in DIR, each
# set to one of the dates (round robin), children before parents.
make_far_tree() {
	local dir=$1
	shift
	mkdir -p "$dir/sub/deeper" "$dir/old"
	local i=0 name
	for name in a b c d; do
		printf '%s\n' "$name" >"$dir/$name"
		printf '%s\n' "$name" >"$dir/sub/$name"
	done
	printf 'x\n' >"$dir/sub/deeper/x"
	ln -s a "$dir/link"
	ln -s ../b "$dir/sub/link"
	local -a dates=("$@")
	while IFS= read -r -d '' name; do
		touch -h -d "${dates[i % ${#dates[@]}]}" -- "$dir/$name" ||
			die "touch -d '${dates[i % ${#dates[@]}]}' failed"
		i=$((i + 1))
	done < <(cd "$dir" && find . -depth -mindepth 1 -printf '%P\0')
	# beyond 2262 for sure: a symlink each, a directory inside one and
	# DIR itself (a time set on an entry leaves its parent's time alone)
	touch -h -d "${dates[0]}" -- "$dir/link"
	touch -h -d "${dates[1]}" -- "$dir/sub/link"
	touch -d "${dates[1]}" -- "$dir/sub/deeper"
	touch -d "${dates[2]}" -- "$dir/sub/a"
	touch -d "${dates[0]}" -- "$dir"
}

# copy_and_check SRC DST WHAT: copy, compare times, re-run copies nothing.
copy_and_check() {
	expect_code 0 "$FERRY" -q --json "$1" "$2"
	same_times "$1" "$2" "$3"
	expect_code 0 "$FERRY" -q --json "$1" "$2"
	expect_json "$LOG/out" files_copied 0
	same_times "$1" "$2" "$3, after the re-run"
}

EXT4_DATES=('2300-01-01 00:00:00.123456789' '2446-05-10 00:00:00'
	'1960-06-15 12:30:00.5' '1901-12-14 00:00:00' '2262-04-11 23:47:17'
	'2262-04-12 00:00:00.000000001' '1969-12-31 23:59:59.999999999')
make_far_tree src "${EXT4_DATES[@]}"
# The test directory's file system must hold these dates itself, or the
# check compares clamped times.
[[ $(stat -c %Y src) == "$(date -d "${EXT4_DATES[0]}" +%s)" ]] ||
	skip_all "$(stat -f -c %T .) at $T does not hold the year 2300"
say "SRC: $(find src -printf '%TY ' | tr -s ' ')"
copy_and_check src dst "ext4 range"

if [[ $(id -u) != 0 ]]; then
	say "SKIP the tmpfs part (years 1000 and 3000): needs root to mount"
else
	mkdir mnt
	if ! mount -t tmpfs -o size=16m tmpfs mnt; then
		say "SKIP the tmpfs part: cannot mount a tmpfs"
	else
		trap 'umount "$T/mnt" 2>/dev/null; cleanup' EXIT
		make_far_tree mnt/src '1000-01-01 00:00:00.25' \
			'3000-01-01 12:00:00.987654321' '1600-03-01 00:00:00' \
			'2500-01-01 00:00:00'
		[[ $(find mnt/src -maxdepth 0 -printf '%TY') == 1000 ]] ||
			die "tmpfs does not hold the year 1000"
		copy_and_check mnt/src mnt/dst "tmpfs, years 1000 and 3000"
		umount mnt || die "cannot unmount the tmpfs"
	fi
fi

finish
