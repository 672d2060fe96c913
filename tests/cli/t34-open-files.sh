#!/bin/bash
# t34-open-files: too many open files is back-pressure, never a file's
# fault (issue 8, item 7).
#
# A tree of 3000 files in some 600 directories is copied under limits on
# open files set with prlimit (util-linux); each run must copy every file
# (tree_equal), exit 0, leave no row failed:
#  A. soft and hard limit 128, the default -j (32 workers, 16 scan threads
#     need about 180): ferry uses fewer and says so once;
#  B. soft and hard 1024 with -j 512 (about 2100 needed): the same;
#  C. soft and hard 24 (cp -a copies this tree at 24): -j 1, and still
#     every file;
#  D. soft 128 but hard 4096, -j 512: ferry raises its soft limit to the
#     hard one, so nothing is cut down and no warning is printed; under
#     strace (one rename held) /proc/PID/limits shows the raised limit;
#  E. the limit drops to 24 while a -j 32 run is stopped (SIGSTOP, prlimit
#     --pid, SIGCONT): the real EMFILEs that follow are waited out
#     (FERRY_FAULT_LOG shows "fdwait" lines), every file arrives, exit 0;
# and with the test build's fault table:
#  F. an EMFILE and an ENFILE injected into single opens: waited out, not
#     counted against --retries, exit 0, nothing failed;
#  G. every open fails with EMFILE (a descriptor leak) and FERRY_FD_WAIT_MS
#     shortens the wait: the run stops within seconds with one message and
#     exit 6, not one failure per file; no row is failed; the same command
#     without the fault completes the job.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd prlimit sqlite3
need_gentree

gen_tree src --seed 3434 --files 3000 --dirs-fanout 3-8 --depth 5 --median 2K --max-size 64K
say "source: $(find src -type f | wc -l) files, $(find src -type d | wc -l) directories, $(find src -type l | wc -l) symlinks"
n_files=$(find src -type f -o -type l | wc -l)
say "descriptors open in this shell: $(find /proc/$BASHPID/fd -mindepth 1 2>/dev/null | wc -l)"

# rows_in MANIFEST STATE: the number of file rows in STATE (1 done, 2
# failed), read from the manifest itself.
rows_in() {
	sqlite3 "file:$1?mode=ro" "SELECT count(*) FROM files WHERE state = $2" 2>/dev/null
}

# copied_all LABEL DST MANIFEST: exit 0, DST equals SRC, every row done.
copied_all() {
	local label=$1 dst=$2 m=$3
	if [[ $RC == 0 ]]; then ok "$label: exit 0"; else
		fail "$label: exit 0 (got $RC)"
		show "$LOG/err"
	fi
	check "$label: no 'Too many open files' on stderr" \
		bash -c "! grep -qi 'too many open files' '$LOG/err'"
	tree_equal src "$dst" || true
	no_temp_files "$dst" || true
	local f d
	f=$(rows_in "$m" 2) d=$(rows_in "$m" 1)
	check "$label: 0 failed rows (got ${f:-?})" test "${f:-x}" = 0
	check "$label: all $n_files rows done (got ${d:-?})" test "${d:-x}" = "$n_files"
}

# warned_fit LABEL: one warning that -j was cut down to fit the limit.
warned_fit() {
	local n
	n=$(grep -c 'needs about [0-9]* open files but the limit is' "$LOG/err")
	check "$label: one warning says -j was fitted to the limit (got ${n:-0})" test "$n" = 1
	show "$LOG/err" 3
}

# A. the default -j at 128
label="A: 128:128, default -j"
run prlimit --nofile=128:128 "$FERRY" --manifest "$T/a.db" src a
copied_all "$label" a "$T/a.db"
warned_fit "$label"

# B. -j 512 at 1024
label="B: 1024:1024, -j 512"
run prlimit --nofile=1024:1024 "$FERRY" --manifest "$T/b.db" -j 512 src b
copied_all "$label" b "$T/b.db"
warned_fit "$label"
check "$label: the warning names -j 512 and the limit 1024" \
	grep -q -- '-j 512 needs about [0-9]* open files but the limit is 1024: using -j [0-9]' "$LOG/err"

# C. a very low limit that raising cannot lift
label="C: 24:24"
if prlimit --nofile=24:24 cp -a src c.cp 2>"$LOG/cp.err" && diff -r --no-dereference src c.cp >/dev/null; then
	say "cp -a copies this tree at a limit of 24"
fi
rm -rf c.cp
run prlimit --nofile=24:24 "$FERRY" --manifest "$T/c.db" src c
copied_all "$label" c "$T/c.db"
check "$label: ferry runs with -j 1" grep -q 'using -j 1\b' "$LOG/err"

# D. soft limit low, hard limit high: raised, nothing cut down
label="D: 128:4096, -j 512"
hard=$(prlimit --nofile --output HARD --noheadings)
if [[ $hard != unlimited ]] && ((hard < 4096)); then
	fail "$label: this shell's hard limit on open files is $hard, below 4096"
else
	: >"$LOG/d.faults"
	run env FERRY_FAULT_LOG="$LOG/d.faults" prlimit --nofile=128:4096 \
		"$FERRY" --manifest "$T/d.db" -j 512 src d
	copied_all "$label" d "$T/d.db"
	check "$label: no warning (the soft limit was raised to 4096 first)" \
		bash -c "! grep -q 'open files but the limit' '$LOG/err'"
	check "$label: no open had to wait for a descriptor" test ! -s "$LOG/d.faults"
	if have_strace; then
		rm -rf d2
		if HOLD_US=3000000 held_run "" renameat,renameat2,rename 1 \
			prlimit --nofile=128:4096 "$FERRY" -q --manifest "$T/d2.db" src d2; then
			pid=$(pgrep -P "$BG_PID" | head -n1)
			pid2=$(pgrep -P "${pid:-0}" | head -n1) # strace > prlimit's exec: ferry
			for p in $pid2 $pid; do
				soft=$(awk '/^Max open files/ {print $4}' "/proc/$p/limits" 2>/dev/null)
				[[ -n $soft ]] && break
			done
			check "$label: /proc/PID/limits of the running ferry says 4096 (got ${soft:-?})" \
				test "${soft:-x}" = 4096
		else
			fail "$label: the held rename came (strace)"
		fi
		bg_wait
		check "$label: the run under strace exits 0 (got $BG_RC)" test "$BG_RC" = 0
	else
		say "$label: no strace: /proc/PID/limits not looked at"
	fi
fi

# E. the limit drops below what the running job holds
label="E: limit dropped to 24 during a -j 32 run"
: >"$LOG/e.faults"
bg env FERRY_FAULT_LOG="$LOG/e.faults" "$FERRY" -q --manifest "$T/e.db" -j 32 src e
if wait_until 30 started_copying e && kill -STOP "$BG_PID" 2>/dev/null; then
	say "$label: stopped with $(find /proc/$BG_PID/fd -mindepth 1 | wc -l) descriptors open"
	prlimit --pid "$BG_PID" --nofile=24:24 || fail "$label: prlimit --pid"
	kill -CONT "$BG_PID"
	bg_wait
	RC=$BG_RC
	cp "$LOG/bg.err" "$LOG/err"
	copied_all "$label" e "$T/e.db"
	check "$label: real EMFILEs were waited out (fdwait in the fault log)" \
		grep -q '^fdwait ' "$LOG/e.faults"
else
	bg_wait
	fail "$label: the run could not be stopped while copying"
fi

if ! "$FERRY" --version 2>/dev/null | grep -q '^test build:'; then
	say "F, G skipped: needs a build with -DFERRY_TESTING=ON"
	finish
fi

# F. single injected EMFILE and ENFILE, with --retries 0: waiting is no retry
label="F: one EMFILE, one ENFILE (--retries 0)"
: >"$LOG/f.faults"
run env FERRY_FAULT=open:40:24,open:400:23 FERRY_FAULT_LOG="$LOG/f.faults" \
	"$FERRY" -q --retries 0 --manifest "$T/f.db" src f
copied_all "$label" f "$T/f.db"
check "$label: both faults fired" test "$(grep -cE '^open (40 24|400 23)$' "$LOG/f.faults")" = 2
show "$LOG/f.faults" 4

# G. a leak: no descriptor ever comes free
label="G: every open fails with EMFILE"
start=$SECONDS
run env FERRY_FAULT=open:0:24 FERRY_FD_WAIT_MS=300 \
	"$FERRY" -q --manifest "$T/g.db" src g
if [[ $RC == 6 ]]; then ok "$label: exit 6"; else
	fail "$label: exit 6 (got $RC)"
	show "$LOG/err"
fi
stderr_is_one_error
check "$label: the message says no descriptor came free" \
	grep -q 'no file descriptor came free' "$LOG/err"
check "$label: stopped within 20 s (took $((SECONDS - start)) s)" test $((SECONDS - start)) -le 20
f=$(rows_in "$T/g.db" 2)
check "$label: 0 failed rows (got ${f:-?})" test "${f:-x}" = 0
run "$FERRY" --manifest "$T/g.db" src g
copied_all "G: the same command without the fault" g "$T/g.db"

finish
