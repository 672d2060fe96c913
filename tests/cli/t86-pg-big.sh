#!/bin/bash
# t86-pg-big: a large file in a shared job (issue 14 on the interface of
# issue 11) is copied in chunks by several streams at once, as on a single
# host, against a throw-away cluster on a Unix socket; SRC behind
# bench/slowfs (2 ms an operation). Each chunk durable in the temp file is
# recorded under the claim (sql/pg/013_chunks.sql), so that the host that
# claims the row after one that died resumes the temp file. Proves, with
# cmp, strace, find, psql and slowfs's counters as oracles:
#  - two hosts, an 80 MiB file and small ones: both exit 0, DST is SRC
#    (cmp), --verify exits 0; run under strace, the host that copies the
#    big file reads SRC with pread64 from more than one thread;
#  - the big file's row holding another host's inode number (psql): copied,
#    not taken for a file changed under the copy (exit 0, cmp);
#  - a host killed (SIGKILL) once psql shows two of the big file's chunks
#    recorded (--bwlimit 16M, so that it is mid-file), then the same
#    command: exit 0, DST is SRC (cmp), no *.ferry-part left in DST, and
#    it read from SRC (slowfs's read_bytes) no more than the chunks not
#    recorded (plus 2 MiB of readahead); psql: the file's chunks dropped
#    once it is done;
#  - a recorded chunk whose bytes in the temp file were damaged (dd) is
#    copied again: DST is SRC (cmp), and SRC read for it and the chunks
#    not recorded only;
#  - a host stopped (SIGSTOP) with two chunks recorded, past its lease: the
#    next host resumes from them into a temp file of its own (another
#    inode: stat), DST is SRC; the stopped host, let go on, writes nothing
#    into the installed file (its mtime is still SRC's) and does not
#    remove it (cmp).
# Skips, saying why, without root, PostgreSQL, strace or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
need_strace
pg_slowfs_start
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }

mkdir -p src/d
head -c $((80 << 20)) /dev/urandom >src/big
for i in $(seq 1 20); do echo "small $i" >"src/d/f$i"; done
mkdir -p "$MNT"
"$SLOWFS" --latency-us 2000 --stats-file "$T/slow.stats" "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
fy() { "$FERRY" --manifest "$URL" --job-name big -j 4 "$@" "$MNT" "$T/dst"; }
# the same in a background subshell that becomes ferry (spawn's pid is
# then ferry's: a kill of it kills ferry, not a shell that waits for it)
fy_exec() { exec "$FERRY" --manifest "$URL" --job-name big -j 4 "$@" "$MNT" "$T/dst"; }

# ---- two hosts, one under strace -----------------------------------------------
# (LeakSanitizer does not run under ptrace: lib.sh, no_leak_check_env)
spawn "$T/h1.out" env "$(no_leak_check_env)" strace -f -e trace=pread64 \
	-o "$T/h1.strace" "$FERRY" --manifest "$URL" --job-name big -j 4 "$MNT" "$T/dst"
p1=$SPAWNED
spawn "$T/h2.out" env "$(no_leak_check_env)" strace -f -e trace=pread64 \
	-o "$T/h2.strace" "$FERRY" --manifest "$URL" --job-name big -j 4 "$MNT" "$T/dst"
p2=$SPAWNED
reap "$p1"
R1=$RC
reap "$p2"
R2=$RC
check "two hosts, an 80 MiB file: both exit 0 (got $R1 $R2)" test "$R1 $R2" = "0 0" ||
	show "$T/h1.out.err"
check "... DST is SRC (cmp, diff -r)" \
	eval 'cmp -s src/big dst/big && diff -r -x .ferry-job src dst'
# the host that copied it: the one with the most threads calling pread64
# (a call another thread interrupts is two lines, "unfinished" and
# "resumed", each with the caller's id), the dynamic loader's reads of
# the program's headers (784 bytes at 64) aside
threads=0
for h in h1 h2; do
	n=$(grep pread64 "$T/$h.strace" | grep -v ', 784, 64)' | awk '{print $1}' | sort -u | wc -l)
	((n > threads)) && threads=$n
done
check "... its host read SRC with pread64 from more than one thread (got $threads)" \
	test "$threads" -ge 2
run "$FERRY" --verify --manifest "$URL" --job-name big "$MNT" "$T/dst"
check "... --verify: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"

# ---- a row with another host's inode number --------------------------------------
rm dst/big
sql "UPDATE ferry.files SET state = 0, hash = NULL, ino = ino + 12345
	WHERE job = $(jid big) AND name = convert_to('big', 'UTF8')" >/dev/null
run fy
check "the big file's row with another inode number: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... copied (cmp)" cmp -s src/big dst/big

# ---- a host killed while it copies the big file -----------------------------------
big_id=$(sql "SELECT id FROM ferry.files WHERE job = $(jid big) AND name = convert_to('big', 'UTF8')")
chunks() { sql "SELECT count(*) FROM ferry.chunks WHERE file = $big_id"; }
# stat NAME: slowfs's counter NAME, exact (SIGUSR1 makes slowfs rewrite
# its file at once: the seq it holds moves)
stat_of() { awk -v n="$1" '$1 == n {print $2}' "$T/slow.stats"; }
counter() {
	local seq
	seq=$(stat_of seq)
	kill -USR1 "$(stat_of pid)"
	wait_until 10 eval '[[ $(stat_of seq) != "$seq" ]]' || die "slowfs did not rewrite its counters"
	stat_of "$1"
}
# kill_mid OUT: a host copying the big file, killed once two of its
# chunks are recorded; K: the chunks recorded then
kill_mid() {
	rm -f dst/big
	sql "UPDATE ferry.files SET state = 0, hash = NULL WHERE id = $big_id" >/dev/null
	spawn "$T/$1" fy_exec --lease 5 --bwlimit 16M
	local pk=$SPAWNED
	if wait_until 60 eval '(($(chunks) >= 2))'; then
		kill -KILL "$pk"
		reap "$pk"
		check "a host killed while it copies the big file (SIGKILL: $RC)" test "$RC" = 137
	else
		reap "$pk"
		fail "a host killed while it copies the big file: no two chunks recorded (exit $RC)"
	fi
	K=$(chunks)
	sleep 6 # its lease runs out
}
kill_mid k.out
sync
echo 3 >/proc/sys/vm/drop_caches
r0=$(counter read_bytes)
run fy
r1=$(counter read_bytes)
check "... the same command: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (cmp)" cmp -s src/big dst/big
no_temp_files dst
most=$((((80 - 16 * K) + 2) << 20))
check "... it read $((r1 - r0)) bytes of SRC: no more than the $((5 - K)) chunks not recorded ($most with readahead)" \
	eval 'test "$((r1 - r0))" -gt 0 && test "$((r1 - r0))" -le "$most"'
check "... psql: the file's chunks dropped once it is done" \
	test "$(sql "SELECT count(*) FROM ferry.partial WHERE file = $big_id")" = 0

# ---- a recorded chunk damaged in the temp file -------------------------------------
kill_mid k2.out
part=$(find dst -name '*.ferry-part' -print -quit)
[[ -n $part ]] || die "no temp file left by the killed host"
# the first chunk's first MiB overwritten (the temp is resumed: inode kept)
dd if=/dev/urandom of="$part" bs=1M count=1 conv=notrunc status=none
sync
echo 3 >/proc/sys/vm/drop_caches
r0=$(counter read_bytes)
run fy
r1=$(counter read_bytes)
check "a recorded chunk damaged in the temp file: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... DST is SRC (cmp): the chunk was copied again" cmp -s src/big dst/big
most=$((((80 - 16 * (K - 1)) + 2) << 20))
check "... it read $((r1 - r0)) bytes of SRC: that chunk and those not recorded ($most with readahead)" \
	eval 'test "$((r1 - r0))" -gt 0 && test "$((r1 - r0))" -le "$most"'
no_temp_files dst

# ---- a host stopped past its lease, then let go on ------------------------------------
rm -f dst/big
sql "UPDATE ferry.files SET state = 0, hash = NULL WHERE id = $big_id" >/dev/null
spawn "$T/a.out" fy_exec --lease 5 --bwlimit 16M
pa=$SPAWNED
wait_until 60 eval '(($(chunks) >= 2))' || die "host A recorded no two chunks"
kill -STOP "$pa"
K=$(chunks)
a_ino=$(find dst -name '*.ferry-part' -printf '%i' -quit)
sleep 6 # its lease runs out
sync
echo 3 >/proc/sys/vm/drop_caches
r0=$(counter read_bytes)
run fy
r1=$(counter read_bytes)
check "host A stopped with $K chunks recorded, past its lease; host B: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (cmp)" cmp -s src/big dst/big
most=$((((80 - 16 * K) + 2) << 20))
check "... B read $((r1 - r0)) bytes of SRC: the chunks not recorded ($most with readahead)" \
	eval 'test "$((r1 - r0))" -gt 0 && test "$((r1 - r0))" -le "$most"'
check "... B's file is another inode than A's temp ($a_ino; stat)" \
	test "$(stat -c %i dst/big)" != "$a_ino"
kill -CONT "$pa"
reap "$pa"
check "host A let go on: ends (exit $RC), DST's file untouched: SRC's mtime, SRC's content" \
	eval 'test "$(stat -c %Y.%y dst/big)" = "$(stat -c %Y.%y src/big)" && cmp -s src/big dst/big' ||
	show "$T/a.out.err"

wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong" ||
	printf '%s\n' "$wrong" | show -
finish
