#!/bin/bash
# t86-pg-big: a large file in a shared job (issue 14 on the interface of
# issue 11) is copied in chunks by several streams at once, as on a single
# host, against a throw-away cluster on a Unix socket; SRC behind
# bench/slowfs (2 ms an operation). A shared job records no chunks: a file
# whose copy stops is copied again from its start, and leaves no temp
# file. Proves, with cmp, strace, find and psql as oracles:
#  - two hosts, an 80 MiB file and small ones: both exit 0, DST is SRC
#    (cmp), --verify exits 0; run under strace, the host that copies the
#    big file reads SRC with pread64 from more than one thread;
#  - the big file's row holding another host's inode number (psql): copied,
#    not taken for a file changed under the copy (exit 0, cmp);
#  - a host killed (SIGKILL) while it copies the big file, then the same
#    command: exit 0, DST is SRC, no *.ferry-part left in DST.
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
"$SLOWFS" --latency-us 2000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
fy() { "$FERRY" --manifest "$URL" --job-name big -j 4 "$@" "$MNT" "$T/dst"; }

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
rm dst/big
sql "UPDATE ferry.files SET state = 0, hash = NULL
	WHERE job = $(jid big) AND name = convert_to('big', 'UTF8')" >/dev/null
spawn "$T/k.out" fy --lease 5
pk=$SPAWNED
has_temp() { [[ -n $(find dst -name '*.ferry-part' -print -quit) ]]; }
if wait_until 30 has_temp; then
	kill -KILL "$pk"
	reap "$pk"
	check "a host killed while it copies the big file (SIGKILL: $RC)" test "$RC" = 137
else
	reap "$pk"
	fail "a host killed while it copies the big file: no temp file seen (exit $RC)"
fi
sleep 6 # its lease runs out
run fy
check "... the same command: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (cmp)" cmp -s src/big dst/big
no_temp_files dst

wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong" ||
	printf '%s\n' "$wrong" | show -
finish
