#!/bin/bash
# t72-probe-leftovers: a run killed in the middle of its DST probes leaves
# nothing behind once the next run has run.
#
# A first run learns which names and metadata DST can hold by creating
# and removing probe files named after its pid in DST's root. Killing it
# (-9) between a create and its unlink used to leave such a file in DST for
# good (found by t26, whose kill landed there). Proves, with strace's fault
# injection killing the first run at its Nth unlinkat, for every N the
# probes reach:
#  - the next plain run exits 0, and no .ferry-probe file is left in DST;
#  - DST equals SRC (diff -r, rsync -c, find);
#  - a dry run and a --verify in between remove nothing and break nothing;
#  - names that only look like probe files stay: another pid's, and a
#    name the probes never make with the killed run's pid.
# Needs strace (allowed to trace).
. "$(dirname "$0")/lib.sh" || exit 1
need_strace
need_cmd sqlite3

gen_tree src --seed 72 --files 40 --no-links

# How many unlinkat calls a first run makes: the probes' and any other.
expect_code 0 env "$(no_leak_check_env)" strace -f -e trace=unlinkat \
	-o "$LOG/count" "$FERRY" -q src dst-count
calls=$(grep -cE '^[0-9]+ +unlinkat\(' "$LOG/count")
check "a first run removes its probe files ($calls unlinkat calls)" test "$calls" -ge 10

probe_files() { find "$1" -maxdepth 1 -name '.ferry-probe.*' -printf '%P\n'; }

left=0
for ((n = 1; n <= calls; n++)); do
	rm -rf dst "$XDG_STATE_HOME/ferry"
	# (strace kills itself with the signal: the subshell keeps bash's
	# "Killed" off the log)
	(env "$(no_leak_check_env)" strace -f -o /dev/null -e trace=unlinkat \
		-e inject=unlinkat:signal=KILL:when=$n "$FERRY" -q src dst \
		>/dev/null 2>"$LOG/killed.err"
	true) 2>/dev/null
	[[ -n $(probe_files dst) ]] && left=$((left + 1))
	pid=$(sqlite3 "$(manifest_path src dst)" \
		"select value from meta where key = 'dst_probe_pid'" 2>/dev/null)
	keep=()
	if [[ $pid =~ ^[0-9]+$ ]]; then
		# the same pattern, names the probes never make
		keep=(".ferry-probe.$((pid + 1)).c.ferry-part"
			".ferry-probe.$pid.x.ferry-part" ".ferry-probe.${pid}0.m.ferry-part")
		for k in "${keep[@]}"; do echo mine >"dst/$k"; done
	fi
	if ((n % 3 == 0)); then
		run "$FERRY" -q -n src dst
		check "kill at unlinkat $n: a dry run after it exits 0 (got $RC)" test "$RC" = 0
	fi
	run "$FERRY" -q src dst
	check "kill at unlinkat $n: the next run exits 0 (got $RC)" test "$RC" = 0
	for k in "${keep[@]}"; do rm -- "dst/$k" 2>/dev/null ||
		fail "kill at unlinkat $n: '$k' (not a probe name) stays"; done
	((${#keep[@]})) && touch -m -r src dst # the removals moved its mtime
	check "kill at unlinkat $n: no probe file left in DST" test -z "$(probe_files dst)"
	check "kill at unlinkat $n: diff -r src dst" diff -r --no-dereference src dst
	if ((n % 4 == 0)); then
		run "$FERRY" -q --verify src dst
		check "kill at unlinkat $n: --verify exits 0 (got $RC)" test "$RC" = 0
	fi
done
check "some kills left a probe file for the next run ($left of $calls)" test "$left" -ge 3
tree_equal src dst
finish
