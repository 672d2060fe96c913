#!/bin/bash
# t53-jobs-auto: -j auto (the default) and threads on demand; behaviour,
# never speed.
#
# Proves:
#  - -j auto, --jobs auto and --jobs=auto are accepted, and auto is the
#    default (--json says "jobs": "auto"; -j 4 says 4, and jobs_peak 4);
#  - -j 0, -j 1025, -j x, -j '' and -j Auto exit 1 (FERRY_EUSAGE, a
#    usage error) with one message naming the bad value and the range,
#    and copy nothing;
#  - a one-file job starts few threads, also with -j 64 (strace -f counts
#    clone/clone3: at most 20, where 64 workers would be 64 and more);
#  - -j 4 copies with at most 4 threads at once, and with more than one
#    (strace: the distinct threads that open SRC's files), -j 1 with one;
#  - bench/slowfs --latency-file changes the latency of a mounted share
#    (the time of a few stats grows when the file says 50 ms, and shrinks
#    again at 0; coarse bounds);
#  - -j auto through slowfs whose latency rises mid-run copies everything
#    right (tree_equal), jobs_peak within 1..256, and a re-run copies none.
# The controller's logic is proven in tests/unit/test_tune.c.
. "$(dirname "$0")/lib.sh" || exit 1

need_cmd rsync

# mk_src DIR N: N files f-0001... in 4 directories.
mk_src() {
	local d=$1 n=$2 i
	mkdir -p "$d"/a "$d"/b "$d"/c "$d"/d || die "mkdir $d"
	for ((i = 1; i <= n; i++)); do
		printf 'file %d %0*d\n' "$i" $((i % 700)) 0 >"$d/$(printf '%s/f-%04d' "$(echo abcd | cut -c$((i % 4 + 1)))" "$i")"
	done
}

mk_src src 300
mkdir one && echo one >one/f-0001

# ---- the option and its default ----------------------------------------

for form in "-j auto" "--jobs auto" "--jobs=auto"; do
	d=dst.${form//[^a-z]/}
	# shellcheck disable=SC2086 # the form is two words or one
	expect_code 0 "$FERRY" -q --json $form one "$d"
	expect_json "$LOG/out" jobs auto
	check "$form: the file is copied" cmp one/f-0001 "$d/f-0001"
done
expect_code 0 "$FERRY" -q --json one dst.default
expect_json "$LOG/out" jobs auto
expect_code 0 "$FERRY" -q --json -j 4 one dst.four
expect_json "$LOG/out" jobs 4
expect_json "$LOG/out" jobs_peak 4

for bad in 0 1025 x "" Auto; do
	expect_code 1 "$FERRY" -j "$bad" one "dst.bad$bad"
	check "-j '$bad': the message names the value and the range" \
		grep -q -- "--jobs must be a number from 1 to 1024 or auto, not '$bad'" "$LOG/err"
	check "-j '$bad': one line on stderr" test "$(wc -l <"$LOG/err")" = 1
	check "-j '$bad': nothing copied" test ! -e "dst.bad$bad"
done

# ---- threads on demand --------------------------------------------------

# clones LOG: the clone and clone3 calls strace -c counted
clones() {
	awk '$NF == "clone" || $NF == "clone3" { n += $4 } END { print n + 0 }' "$1"
}

if have_strace; then
	for j in auto 64; do
		env "$(no_leak_check_env)" strace -f -c -e trace=clone,clone3 -o "$LOG/clone.$j" \
			"$FERRY" -q -j "$j" --json one "dst.clone$j" >"$LOG/out" 2>"$LOG/err"
		rc=$?
		check "one file, -j $j under strace: exit 0 (got $rc)" test "$rc" = 0
		n=$(clones "$LOG/clone.$j")
		check "one file, -j $j: at most 20 threads started (got $n)" test "$n" -le 20
		show "$LOG/clone.$j"
		expect_json "$LOG/out" workers 1
	done

	# openers TRACE: the threads that opened SRC's files for reading
	openers() {
		grep -E 'openat2?\([0-9]+, "f-[0-9]{4}", \{?(flags=)?O_RDONLY' "$1" |
			awk '{ print $1 }' | sort -u | wc -l
	}
	for j in 4 1; do
		env "$(no_leak_check_env)" strace -f -e trace=openat,openat2 -o "$LOG/open.$j" \
			"$FERRY" -q -j "$j" src "dst.open$j" >"$LOG/out" 2>"$LOG/err"
		rc=$?
		check "-j $j under strace: exit 0 (got $rc)" test "$rc" = 0
		tree_equal src "dst.open$j"
		n=$(openers "$LOG/open.$j")
		check "-j $j: at most $j threads open SRC's files (got $n)" test "$n" -le "$j"
		if ((j > 1)); then
			check "-j $j: more than one thread opens SRC's files (got $n)" test "$n" -gt 1
		else
			check "-j 1: one thread opens SRC's files (got $n)" test "$n" = 1
		fi
	done
else
	say "SKIP the thread counts: strace cannot trace here"
fi

# ---- slowfs --latency-file, and auto under a changing latency -----------

SLOWFS=${GENTREE:+$(dirname "$GENTREE")/slowfs}
MNT=$T/mnt
umount_mnt() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
	fi
}
trap 'umount_mnt; cleanup' EXIT

# stat_ms N: milliseconds that N stats of one name through the share take
stat_ms() {
	local t0 t1 i
	t0=$(date +%s%N)
	for ((i = 0; i < $1; i++)); do stat -c %s "$MNT/a/f-0004" >/dev/null || return 1; done
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

set_latency() {
	echo "$1" >"$T/lat.tmp" && mv -f "$T/lat.tmp" "$T/lat"
}

# stats_fast, stats_slow: 5 stats take under 200 ms, or 250 ms or more
# (STATS_MS: what the last try took). Polled: slowfs reads the latency
# file every 0.1 s, and one try on a loaded machine may take 200 ms at
# latency 0, where every try at 50 ms takes 250 ms or more.
stats_fast() { STATS_MS=$(stat_ms 5) && ((STATS_MS < 200)); }
stats_slow() { STATS_MS=$(stat_ms 5) && ((STATS_MS >= 250)); }

if [[ -z $SLOWFS || ! -x $SLOWFS || ! -c /dev/fuse ]] || ! command -v fusermount3 >/dev/null; then
	say "SKIP slowfs: needs bench/slowfs (libfuse3), /dev/fuse and fusermount3"
else
	mkdir "$MNT"
	echo 0 >"$T/lat"
	if ! "$SLOWFS" --latency-us 0 --latency-file "$T/lat" "$T/src" "$MNT" \
		-o attr_timeout=0,entry_timeout=0 2>"$LOG/slowfs.err"; then
		say "SKIP slowfs: it does not mount here"
		show "$LOG/slowfs.err"
	else
		STATS_MS=
		wait_until 5 stats_fast
		check "slowfs --latency-file: 5 stats at 0 take under 200 ms (last try ${STATS_MS:-?} ms)" \
			test "$?" = 0
		set_latency 50000
		wait_until 5 stats_slow
		check "slowfs --latency-file: 5 stats at 50 ms take 250 ms or more (last try ${STATS_MS:-?} ms)" \
			test "$?" = 0
		set_latency 0
		wait_until 5 stats_fast
		check "slowfs --latency-file: back at 0, under 200 ms again (last try ${STATS_MS:-?} ms)" \
			test "$?" = 0

		set_latency 200
		sleep 0.3
		(sleep 0.3 && set_latency 3000) &
		sw=$!
		expect_code 0 "$FERRY" -q --json --manifest "$T/mid.db" "$MNT" mid
		wait "$sw"
		peak=$(json_get "$LOG/out" jobs_peak)
		check "auto under a changing latency: jobs_peak within 1..256 (got ${peak:-?})" \
			test "${peak:-0}" -ge 1 -a "${peak:-0}" -le 256
		tree_equal src mid
		no_temp_files mid
		expect_code 0 "$FERRY" -q --json --manifest "$T/mid.db" "$MNT" mid
		expect_json "$LOG/out" files_copied 0
		umount_mnt
	fi
fi

finish
