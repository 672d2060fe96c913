#!/bin/bash
# t35-status-readonly: `ferry status` works without write access to the
# manifest or its directory, and the lock file does not stop a reader.
#
# Proves:
#  A. a user (nobody) who may read the manifest and its directory but write
#     neither: status and status --json exit 0 with the counts of the
#     manifest (an oracle reads a copy of it with the sqlite3 shell), and
#     nothing in the directory changes; the lock a run makes has the
#     manifest's permissions, so that user can read it; a lock that user
#     cannot open (an older ferry made it 0600) gives "running: unknown",
#     not a false "running: no", and the next run gives it the manifest's
#     permissions; --verify, which marks rows, exits 3 and says that it
#     needs write access;
#  B. the manifest's directory on a read-only bind mount (root): status by
#     --manifest and by SRC DST (state directory read-only) exit 0 with the
#     same counts; --verify exits 3 saying it needs write access;
#  C. while a run holds the lock (frozen with SIGSTOP, its -wal and -shm in
#     place): status as nobody and through the read-only mount exits 0 and
#     says "running: yes (pid N)"; after the run, nobody's status counts
#     every file done;
#  D. status for a pair without a manifest creates no state directory;
#  E. nobody polls status and export in turn while 20 runs start and end
#     (so the manifest's -wal and -shm come and go under the reader): every
#     call exits 0; each status says all files done, each export (csv)
#     lists every file, done.
# Parts that need root or an unprivileged user skip themselves with the
# reason when those are missing.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3

gen_tree src --seed 3535 --files 400 --no-links
n_files=$(find src -type f | wc -l)
n_bytes=$(find src -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
mkdir -m 0755 mf
M=$T/mf/m.db

expect_code 0 "$FERRY" -q --manifest "$M" src dst || die "the first copy failed"
check "no -wal or -shm is left after the run" \
	test ! -e "$M-wal" -a ! -e "$M-shm"

# oracle_counts: "done pending failed" of a copy of the manifest (the copy,
# so that the sqlite3 shell leaves no -wal or -shm next to the real one).
oracle_counts() {
	cp "$M" "$LOG/oracle.db" &&
		sqlite3 -readonly "$LOG/oracle.db" \
			"SELECT sum(state = 1), sum(state = 0), sum(state = 2) FROM files;" |
		tr '|' ' '
	rm -f "$LOG/oracle.db" "$LOG/oracle.db-wal" "$LOG/oracle.db-shm"
}
read -r o_done o_pending o_failed <<<"$(oracle_counts)"
check "oracle: the manifest has $n_files files done ($o_done), none pending or failed" \
	test "$o_done" = "$n_files" -a "$o_pending" = 0 -a "$o_failed" = 0

# dir_snapshot DIR: names, sizes, modes, mtimes and hashes of DIR's files.
dir_snapshot() {
	(cd "$1" && find . -printf '%p %s %m %T@\n' | sort && sha1sum ./* | sort)
}

# status_says FILE: the text status in FILE has the oracle's counts.
status_says() {
	local what=$1 f=$2 want
	for want in "done: $o_done files, $n_bytes bytes" "pending: 0 files, 0 bytes" \
		"failed: 0 files"; do
		if grep -qxF -- "$want" "$f"; then ok "$what: '$want'"; else
			fail "$what: '$want'"
			show "$f"
		fi
	done
}

# running_line WHAT REGEX: the last status's "running:" line matches.
running_line() {
	if grep -qE -- "^running: $2\$" "$LOG/out"; then ok "$1: running: $2"; else
		fail "$1: running: $2"
		show "$LOG/out" 6
	fi
}

# verify_refused WHAT CMD...: --verify exits 3 with one error that says it
# needs write access.
verify_refused() {
	local what=$1
	shift
	expect_code 3 "$@" && stderr_is_one_error
	if grep -q 'verify needs write access' "$LOG/err"; then
		ok "$what: --verify says it needs write access"
	else
		fail "$what: --verify says it needs write access"
		show "$LOG/err"
	fi
}

check_unprivileged() {
	if ! can_run_unprivileged; then
		say "SKIP A (unprivileged reader): $WHY_NOT"
		return
	fi
	check "A: the lock has the manifest's permissions ($(stat -c %a "$M.lock"), $(stat -c %a "$M"))" \
		test "$(stat -c %a "$M.lock")" = "$(stat -c %a "$M")"
	if as_nobody test -w "$T/mf" || as_nobody test -w "$M" || ! as_nobody test -r "$M"; then
		fail "A: set-up: nobody may read but not write the manifest and its directory"
		return
	fi
	dir_snapshot mf >"$LOG/mf.before"
	expect_code 0 as_nobody "$FERRY" status --manifest "$M" &&
		status_says "A: nobody's status" "$LOG/out"
	running_line "A: nobody's status" no
	expect_code 0 as_nobody "$FERRY" status --json --manifest "$M"
	expect_json "$LOG/out" done "$o_done"
	expect_json "$LOG/out" running_pid 0
	verify_refused "A: nobody" as_nobody "$FERRY" --verify --manifest "$M" src dst
	dir_snapshot mf >"$LOG/mf.after"
	check "A: nobody's status and --verify changed nothing in the manifest's directory" \
		cmp -s "$LOG/mf.before" "$LOG/mf.after"

	# a lock nobody cannot open, as an older ferry made it
	chmod 0600 "$M.lock"
	expect_code 0 as_nobody "$FERRY" status --manifest "$M"
	running_line "A: unreadable lock" "unknown \\(.*Permission denied\\)"
	expect_code 0 as_nobody "$FERRY" status --json --manifest "$M"
	expect_json "$LOG/out" running_pid None
	expect_code 0 "$FERRY" -q --manifest "$M" src dst
	check "A: the next run gives the lock the manifest's permissions ($(stat -c %a "$M.lock"))" \
		test "$(stat -c %a "$M.lock")" = "$(stat -c %a "$M")"
}

RO=
mount_ro() {
	[[ $(id -u) == 0 ]] || {
		WHY_NOT="needs root to bind-mount read-only"
		return 1
	}
	mkdir -p "$T/ro-mf" "$T/ro-state"
	if mount --bind "$T/mf" "$T/ro-mf" 2>"$LOG/mount.err"; then
		track_mount "$T/ro-mf"
	else
		WHY_NOT="cannot bind-mount: $(head -c 200 "$LOG/mount.err")"
		return 1
	fi
	if ! mount -o remount,bind,ro "$T/ro-mf" 2>"$LOG/mount.err"; then
		WHY_NOT="cannot remount read-only: $(head -c 200 "$LOG/mount.err")"
		return 1
	fi
	mount --bind "$XDG_STATE_HOME" "$T/ro-state" && track_mount "$T/ro-state" &&
		mount -o remount,bind,ro "$T/ro-state" || {
		WHY_NOT="cannot bind-mount the state directory read-only"
		return 1
	}
	if touch "$T/ro-mf/probe" 2>/dev/null; then
		WHY_NOT="the read-only bind mount is writable"
		return 1
	fi
	RO=$T/ro-mf
}

check_read_only_mount() {
	if [[ -z $RO ]]; then
		say "SKIP B (read-only mount): $WHY_NOT"
		return
	fi
	expect_code 0 "$FERRY" status --manifest "$RO/m.db" &&
		status_says "B: status on a read-only mount" "$LOG/out"
	# a manifest at its default place, under a read-only state directory
	expect_code 0 "$FERRY" -q src dst-default || return
	expect_code 0 env XDG_STATE_HOME="$T/ro-state" "$FERRY" status src dst-default &&
		status_says "B: status src dst, state directory read-only" "$LOG/out"
	verify_refused "B: read-only mount" "$FERRY" --verify --manifest "$RO/m.db" src dst
}

check_during_run() {
	local have_nobody=1 big_m=$T/mf/big.db n_big
	can_run_unprivileged || have_nobody=0
	if [[ -z $RO ]] && ((!have_nobody)); then
		say "SKIP C (status during a run): needs root"
		return
	fi
	gen_tree big --seed 3536 --files 3000 --median 32K --no-links
	n_big=$(find big -type f | wc -l)
	bg "$FERRY" -q --manifest "$big_m" big dst-big
	if ! wait_until 60 started_copying dst-big; then
		fail "C: the run started copying"
		return
	fi
	kill -STOP "$BG_PID"
	if ! wait_until 5 is_stopped "$BG_PID"; then
		fail "C: the run was still going when frozen (finished too soon?)"
		kill -CONT "$BG_PID"
		return
	fi
	check "C: the frozen run has its -wal and -shm" test -e "$big_m-wal" -a -e "$big_m-shm"
	if ((have_nobody)); then
		expect_code 0 as_nobody "$FERRY" status --manifest "$big_m"
		running_line "C: nobody's status during a run" "yes \\(pid $BG_PID\\)"
		expect_code 0 as_nobody "$FERRY" status --json --manifest "$big_m"
		expect_json "$LOG/out" running_pid "$BG_PID"
	fi
	if [[ -n $RO ]]; then
		expect_code 0 "$FERRY" status --manifest "$RO/big.db"
		running_line "C: status on the read-only mount during a run" "yes \\(pid $BG_PID\\)"
	fi
	kill -CONT "$BG_PID"
	bg_wait
	check "C: the observed run completes (exit $BG_RC)" test "$BG_RC" = 0
	if ((have_nobody)); then
		expect_code 0 as_nobody "$FERRY" status --manifest "$big_m"
		if grep -qx "done: $n_big files, .*" "$LOG/out"; then
			ok "C: after the run nobody's status says $n_big files done"
		else
			fail "C: after the run nobody's status says $n_big files done"
			show "$LOG/out"
		fi
	fi
}

check_no_state_dir() {
	expect_code 3 env XDG_STATE_HOME="$T/nowhere" "$FERRY" status src dst &&
		stderr_is_one_error
	check "D: status creates no state directory" test ! -e "$T/nowhere"
}

check_polling() {
	if ! can_run_unprivileged; then
		say "SKIP E (polling as nobody): $WHY_NOT"
		return
	fi
	local i run_fail=0 polls=0 poll_fail=0 poll_wrong=0 poller
	(
		n=0 f=0 w=0
		while [[ ! -e $LOG/stop-polling ]]; do
			n=$((n + 1))
			if ((n % 2)); then
				as_nobody "$FERRY" status --manifest "$M" >"$LOG/poll.out" 2>>"$LOG/poll.err"
			else
				as_nobody "$FERRY" export --format=csv --manifest "$M" >"$LOG/poll.out" 2>>"$LOG/poll.err"
			fi
			if (($? == 0)); then
				if ((n % 2)); then
					grep -qx "done: $n_files files, $n_bytes bytes" "$LOG/poll.out"
				else
					test "$(grep -c $',done\r$' "$LOG/poll.out")" = "$n_files" &&
						test "$(grep -c $'\r$' "$LOG/poll.out")" = $((n_files + 1))
				fi || {
					w=$((w + 1))
					cat "$LOG/poll.out" >>"$LOG/poll.wrong"
				}
			else
				f=$((f + 1))
			fi
		done
		echo "$n $f $w" >"$LOG/poll.count"
	) &
	poller=$!
	BG_PIDS+=("$poller")
	for ((i = 0; i < 20; i++)); do
		"$FERRY" -q --manifest "$M" src dst 2>>"$LOG/runs.err" || run_fail=$((run_fail + 1))
	done
	touch "$LOG/stop-polling"
	wait "$poller"
	read -r polls poll_fail poll_wrong <"$LOG/poll.count"
	check "E: 20 runs while nobody polls status all exit 0 ($run_fail failed)" \
		test "$run_fail" = 0
	show "$LOG/runs.err" 3
	check "E: $polls status and export calls by nobody during those runs all exit 0 ($poll_fail failed)" \
		test "$poll_fail" = 0 -a "$polls" -gt 0
	show "$LOG/poll.err" 3
	check "E: and all give $n_files files done ($poll_wrong did not)" test "$poll_wrong" = 0
	show "$LOG/poll.wrong" 12
}

check_unprivileged
check_polling
mount_ro || true
check_read_only_mount
check_during_run
check_no_state_dir
finish
