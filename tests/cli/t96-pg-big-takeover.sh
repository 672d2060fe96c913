#!/bin/bash
# t96-pg-big-takeover: a file's copy taken over by another host in a
# shared job (issue 14), against a throw-away PostgreSQL cluster on a Unix
# socket. Two ways a late host could spoil the copy the next one installs,
# found by a review of the chunk records (sql/pg/013_chunks.sql), and the
# room a takeover needs. Oracles: cmp, stat, df, ferry --verify. Proves:
#  - host A stalled where it makes its temp file (a test build's hook) past
#    its lease, for a 40 MiB file and for an 80 MiB one (in chunks); host B
#    copies the file meanwhile; A, let go on, makes and replaces nothing
#    (its fence): both exit 0, DST is SRC (cmp), no temp left, --verify 0;
#  - DST a 100 MiB tmpfs, an 80 MiB file: host A killed with 3 chunks
#    recorded (48 MiB in its temp); host B takes them over into a temp of
#    its own (the old one's chunks let go as they are copied: df), exit 0,
#    DST is SRC (cmp), having copied 32 MiB from SRC (its summary);
#  - host A killed with chunks recorded, host B takes them over and is
#    killed in turn: the record (psql) then names B's temp (its inode:
#    find) and holds A's chunks, and host C copies from SRC only the
#    chunks neither recorded (its summary), DST is SRC (cmp).
# Skips, saying why, without root, PostgreSQL or a test build.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
"$FERRY" --version | grep -q "test build" || skip_all "needs a test build (FERRY_TEST_CREATE_STOP)"
pg_local_start

# ---- a host stalled where it makes its temp, past its lease ---------------
for mb in 40 80; do
	rm -rf src dst
	mkdir -p src
	head -c $((mb << 20)) /dev/urandom >src/f
	rm -f "$T/w.hit"
	spawn "$T/a.out" env FERRY_TEST_CREATE_STOP="$T/w.hit" "$FERRY" --manifest "$URL" \
		--job-name "s$mb" -j 1 --lease 5 "$T/src" "$T/dst"
	pa=$SPAWNED
	wait_until 60 test -e "$T/w.hit" || die "host A never reached its temp file"
	sleep 7 # past A's lease (A stopped itself: SIGSTOP)
	spawn "$T/b.out" "$FERRY" --manifest "$URL" --job-name "s$mb" -j 1 --lease 5 \
		--bwlimit 8M "$T/src" "$T/dst"
	pb=$SPAWNED
	wait_until 30 eval '[[ -n $(find dst -name "*.ferry-part" -print -quit) ]]' ||
		die "host B made no temp file"
	kill -CONT "$pa" # A goes on while B copies
	reap "$pb"
	RB=$RC
	reap "$pa"
	RA=$RC
	check "$mb MiB, host A stalled at its temp past its lease, B copies: exit $RA and $RB (0 0)" \
		test "$RA $RB" = "0 0" || show "$T/a.out.err" "$T/b.out.err"
	check "... DST is SRC (cmp)" cmp -s src/f dst/f
	no_temp_files dst
	run "$FERRY" --verify --manifest "$URL" --job-name "s$mb" "$T/src" "$T/dst"
	check "... --verify: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
done

# ---- a takeover taken over in turn -------------------------------------------------
rm -rf src dst
mkdir -p src
head -c $((80 << 20)) /dev/urandom >src/big
fr_exec() { exec "$FERRY" --manifest "$URL" --job-name relay -j 2 "$@" "$T/src" "$T/dst"; }
# of: FROM clause of the job's chunk records
of="ferry.chunks c JOIN ferry.partial p ON p.file = c.file
	JOIN ferry.files f ON f.id = c.file JOIN ferry.jobs j ON j.id = f.job
	WHERE j.name = 'relay'"
rchunks() { sql "SELECT count(*) FROM $of"; }
spawn "$T/ra.out" fr_exec --lease 5 --bwlimit 8M
pa=$SPAWNED
wait_until 60 eval '(($(rchunks) >= 2))' || die "host A recorded no two chunks"
kill -KILL "$pa"
reap "$pa"
KA=$(rchunks)
a_idx=$(sql "SELECT string_agg(c.idx::text, ',') FROM $of")
# the temp of big (not a probe's, .ferry-probe.*)
temp_ino() { find dst -name '.big.*.ferry-part' -printf '%i' -quit; }
a_ino=$(temp_ino)
sleep 6 # A's lease runs out
spawn "$T/rb.out" fr_exec --lease 5 --bwlimit 8M
pb=$SPAWNED
# B's record: the inode of its own temp (not A's), A's chunks in it
b_has_a() {
	local ino
	ino=$(temp_ino)
	[[ -n $ino && $ino != "$a_ino" ]] &&
		[[ $(sql "SELECT count(*) FROM $of AND p.tmp_ino = $ino
		AND c.idx IN ($a_idx)") == "$KA" ]]
}
wait_until 60 b_has_a
B_HAS=$?
kill -KILL "$pb"
reap "$pb"
KB=$(rchunks)
check "host A killed with chunks $a_idx recorded; host B, killed: its record names its own temp and holds A's chunks ($KB in all)" \
	test "$B_HAS" = 0 || show "$T/rb.out.err"
sleep 6 # B's lease runs out
run "$FERRY" --manifest "$URL" --job-name relay -j 2 "$T/src" "$T/dst"
check "... host C: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (cmp)" cmp -s src/big dst/big
check "... C copied only the $((5 - KB)) chunks neither recorded from SRC" \
	grep -q "1 files copied ($((16 * (5 - KB))).0 MiB)" "$LOG/err" || show "$LOG/err"
no_temp_files dst

# ---- a takeover's room -----------------------------------------------------------
rm -rf src dst
mkdir -p src dst
mount -t tmpfs -o size=100M tmpfs dst || skip_all "cannot mount a tmpfs"
trap 'umount "$T/dst" 2>/dev/null; pg_cleanup; cleanup' EXIT
head -c $((80 << 20)) /dev/urandom >src/big
fy_exec() { exec "$FERRY" --manifest "$URL" --job-name room -j 2 "$@" "$T/src" "$T/dst"; }
spawn "$T/k.out" fy_exec --lease 5 --bwlimit 16M
pk=$SPAWNED
chunks() { sql "SELECT count(*) FROM ferry.chunks c JOIN ferry.files f ON f.id = c.file
	JOIN ferry.jobs j ON j.id = f.job WHERE j.name = 'room'"; }
wait_until 60 eval '(($(chunks) >= 3))' || die "host A recorded no three chunks"
kill -KILL "$pk"
reap "$pk"
K=$(chunks)
sleep 6 # its lease runs out
run "$FERRY" --manifest "$URL" --job-name room -j 2 "$T/src" "$T/dst"
check "DST of 100 MiB, host A killed with $K chunks of 80 MiB recorded; B: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (cmp)" cmp -s src/big dst/big
check "... B copied only the $((5 - K)) chunks not recorded from SRC" \
	grep -q "1 files copied ($((16 * (5 - K))).0 MiB)" "$LOG/err" || show "$LOG/err"
no_temp_files dst
umount "$T/dst"
finish
