#!/bin/bash
# t36-stdout-errors: a standard output that cannot be written (a full disk,
# a pipe whose reader is gone) is reported once on stderr, ferry exits 7,
# and a run cut short by it leaves a true manifest that the same command
# completes.
#
# Proves:
#  A. `ferry -v` into /dev/full: exit 7, one line "ferry: cannot write to
#     standard output: No space left on device"; every row the manifest
#     calls done is in DST with its size and hash (an xxhsum oracle), no
#     temp file is left; the same command completes (DST == SRC, --verify
#     clean);
#  B. `ferry -v ... | head -n 1` (the listing is larger than a pipe holds):
#     exit 7, not killed by SIGPIPE, one "Broken pipe" line, head got its
#     line, the same invariant and completion;
#  C. stdout a pipe that has no reader from the start: exit 7 and one
#     "Broken pipe" line;
#  D. the run stops when its listing cannot be written (renames slowed by
#     strace, so the moment is certain): rows are left pending, the
#     invariant holds, the same command completes;
#  E. --json, status, status --json and --help into /dev/full, and status
#     into a pipe without a reader: exit 7 and the one line each (not 6
#     with no message, not death by SIGPIPE);
#  F. --verify whose mismatch line cannot be written: exit 7, not 5; what
#     it found is not lost: the next plain run repairs the file (DST ==
#     SRC) and --verify is then clean;
#  G. a no-op re-run with -v into /dev/full writes nothing and exits 0.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd rsync mkfifo
[[ -c /dev/full && -w /dev/full ]] || skip_all "needs a writable /dev/full"

# about 3000 lines of listing, well over the 64 KiB a pipe holds
gen_tree src --seed 3636 --files 3000 --median 4K --no-links
n_files=$(find src -type f | wc -l)

# out_run TARGET CMD...: CMD with stdout to TARGET (a path, or &N), stderr
# in $LOG/err; RC is its exit status.
out_run() {
	local target=$1
	shift
	if [[ $target == '&'* ]]; then
		"$@" >&"${target#&}" 2>"$LOG/err"
	else
		"$@" >"$target" 2>"$LOG/err"
	fi
	RC=$?
}

# exit_is WHAT N: the last command exited N.
exit_is() {
	if [[ $RC == "$2" ]]; then ok "$1: exit $2"; else
		fail "$1: exit $2 (got $RC)"
		show "$LOG/err"
	fi
}

# said_once WHAT REASON: stderr has the output error exactly once, and no
# "internal error".
said_once() {
	local n
	n=$(grep -c "^ferry: cannot write to standard output: $2" "$LOG/err")
	if [[ $n == 1 ]] && ! grep -q 'internal error' "$LOG/err"; then
		ok "$1: 'cannot write to standard output: $2' said once"
	else
		fail "$1: 'cannot write to standard output: $2' said once (got $n)"
		show "$LOG/err"
	fi
}

# cut_short_ok WHAT DST: the manifest of src -> DST is true after a run
# that stopped, and the same command completes the job.
cut_short_ok() {
	local m
	m=$(manifest_path src "$2")
	manifest_invariant "$m" "$2" "$1"
	no_temp_files "$2"
	final_state src "$2"
}

check_full() {
	out_run /dev/full "$FERRY" -v src dstA
	exit_is "A: -v into /dev/full" 7
	said_once "A" "No space left on device"
	cut_short_ok "A" dstA
}

check_head() {
	"$FERRY" -v src dstB 2>"$LOG/err" | head -n 1 >"$LOG/head.out"
	RC=${PIPESTATUS[0]}
	exit_is "B: -v | head -n 1" 7
	said_once "B" "Broken pipe"
	check "B: head got its line" test "$(wc -l <"$LOG/head.out")" = 1
	cut_short_ok "B" dstB
}

# A pipe whose only reader is closed before ferry starts: every write to
# it fails with EPIPE (and would raise SIGPIPE).
open_readerless_pipe() {
	rm -f "$T/fifo"
	mkfifo "$T/fifo" || die "mkfifo failed"
	exec {rd}<>"$T/fifo" # read-write: the open for writing does not block
	exec {PIPE_W}>"$T/fifo"
	exec {rd}<&-
}

check_no_reader() {
	open_readerless_pipe
	out_run "&$PIPE_W" "$FERRY" -v src dstC
	exec {PIPE_W}>&-
	exit_is "C: -v into a pipe without a reader" 7
	said_once "C" "Broken pipe"
	cut_short_ok "C" dstC
}

check_stops() {
	if ! have_strace; then
		say "SKIP D (the run stops): needs strace, allowed to trace"
		return
	fi
	local m pending
	# each rename 1 ms slower, times SLOW: in a sanitizer build the rest
	# of the run is that much slower too, and with 1 ms a ThreadSanitizer
	# run once had every file done before its first listing line failed
	out_run /dev/full env "$(no_leak_check_env)" strace -f -o /dev/null \
		-e trace='?renameat,?renameat2' \
		-e inject="?renameat,?renameat2:delay_enter=$((1000 * SLOW))" \
		"$FERRY" -v -j 2 src dstD
	exit_is "D: a slowed -v run into /dev/full" 7
	said_once "D" "No space left on device"
	m=$(manifest_path src dstD)
	pending=$(sqlite3 -readonly "$m" 'SELECT count(*) FROM files WHERE state = 0;')
	check "D: the run stopped, $pending of $n_files files left pending" \
		test "${pending:-0}" -gt 0
	cut_short_ok "D" dstD
}

check_summaries() {
	out_run /dev/full "$FERRY" -q --json src dstA
	exit_is "E: --json into /dev/full" 7
	said_once "E: --json" "No space left on device"
	out_run /dev/full "$FERRY" status src dstA
	exit_is "E: status into /dev/full" 7
	said_once "E: status" "No space left on device"
	out_run /dev/full "$FERRY" status --json src dstA
	exit_is "E: status --json into /dev/full" 7
	said_once "E: status --json" "No space left on device"
	out_run /dev/full "$FERRY" --help
	exit_is "E: --help into /dev/full" 7
	said_once "E: --help" "No space left on device"
	open_readerless_pipe
	out_run "&$PIPE_W" "$FERRY" status src dstA
	exec {PIPE_W}>&-
	exit_is "E: status into a pipe without a reader" 7
	said_once "E: status | (no reader)" "Broken pipe"
}

check_verify() {
	local victim
	victim=$(cd dstA && find . -type f -size +0 | sort | head -n 1)
	printf 'X' | dd of="dstA/$victim" bs=1 count=1 conv=notrunc status=none ||
		die "cannot change $victim"
	out_run /dev/full "$FERRY" --verify src dstA
	exit_is "F: --verify with a mismatch into /dev/full" 7
	said_once "F" "No space left on device"
	expect_code 0 "$FERRY" -q src dstA
	check "F: the next run repaired $victim" cmp -s "src/$victim" "dstA/$victim"
	tree_equal src dstA
	expect_code 0 "$FERRY" -q --verify src dstA
}

check_noop() {
	expect_code 0 "$FERRY" -q src dstA
	out_run /dev/full "$FERRY" -v src dstA
	exit_is "G: a no-op -v run into /dev/full" 0
	check "G: and says nothing about standard output" \
		test "$(grep -c 'standard output' "$LOG/err")" = 0
}

check_full
check_head
check_no_reader
check_stops
check_summaries
check_verify
check_noop
finish
