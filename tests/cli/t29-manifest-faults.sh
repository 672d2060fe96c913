#!/bin/bash
# t29-manifest-faults: a failing write or fsync of the manifest stops ferry
# with a clear error, never leaves a false done mark, and the next run
# resumes and completes.
#
# ferry's test build can route the manifest through an SQLite VFS shim
# (src/mvfs.c) whose nth write ("mwrite", the database file and its WAL) or
# nth fsync ("msync") fails: FERRY_FAULT=mwrite:N:ERRNO (EIO gives SQLite's
# I/O error, ENOSPC a full disk). For several N, on a fresh job and on an
# incremental --delete re-run:
#  - ferry ends with exit 3 (or 0 when the run had fewer calls than N), with
#    one "ferry: manifest ..." line last on stderr, no crash;
#  - the manifest invariant holds (every done row is in DST with its size
#    and hash) and the manifest is still usable: the plain command completes
#    (exit 0), DST equals SRC, no temp file is left, --verify exits 0.
# A new manifest whose creation fails is removed again, so the next run is
# not refused with "not an SQLite database".
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd
need_test_hooks

read -r -a NTHS <<<"$(pick '1 3 6 20 60 200' '1 6 60' '1 2 3 4 5 6 8 12 20 40 60 100 200 400 1000')"
ERRNOS=(5 28)
work_in_tmpfs 1g
gen_tree src --seed 2929 --files "$(pick 600 300 3000)" --max-size 256K
injected=0 stopped=0

fresh_job() { rm -rf dst "$XDG_STATE_HOME/ferry"; }

# fault_run LABEL SPEC [OPTIONS...]: one run with the fault, then the checks.
fault_run() {
	local label=$1 spec=$2
	shift 2
	run env FERRY_FAULT="$spec" "$FERRY" -q "$@" src dst
	injected=$((injected + 1))
	no_sanitizer_report "$LOG/err"
	case $RC in
	3)
		stopped=$((stopped + 1))
		if tail -n1 "$LOG/err" | grep -q "^ferry: manifest "; then
			ok "$label: exit 3, the last line names the manifest"
		else
			fail "$label: exit 3, the last line names the manifest"
			show "$LOG/err"
		fi
		;;
	0) ok "$label: exit 0 (the run had fewer manifest calls)" ;;
	*)
		fail "$label: exit 3 or 0 (got $RC)"
		show "$LOG/err"
		;;
	esac
	local m
	m=$(manifest_path src dst)
	if [[ -e $m ]]; then
		manifest_invariant "$m" dst "$label"
	else
		ok "$label: no manifest left (its creation failed)"
	fi
	final_state src dst "$@"
}

for op in mwrite msync; do
	for err in "${ERRNOS[@]}"; do
		[[ $op == msync && $err == 28 ]] && continue # fsync: EIO only
		for nth in "${NTHS[@]}"; do
			say "--- $op:$nth:$err on a fresh job"
			fresh_job
			fault_run "$op:$nth:$err fresh" "$op:$nth:$err"
		done
	done
done

# incremental: a complete job, a mutated source, a failing manifest
for nth in "${NTHS[@]}"; do
	for op in mwrite msync; do
		"$GENTREE" --mutate 10 --add 20 --delete-pct 3 --seed $((2900 + nth)) \
			src >"$LOG/mutate.out" 2>&1 || die "gentree --mutate failed"
		say "--- $op:$nth:5 on an incremental --delete run"
		fault_run "$op:$nth:5 incremental" "$op:$nth:5" --delete
	done
done

check "some faults stopped ferry (exit 3: $stopped of $injected runs)" test "$stopped" -gt 0
say "manifest faults injected: $injected runs (mwrite, msync x nth ${NTHS[*]}), $stopped stopped ferry"
finish
