#!/bin/bash
# t80-pg-fence: a host cut off from the shared manifest past its lease
# never puts a copy in place over another host's (issue 14: "a late
# result with a stale token is refused" covers the done marks; this is
# DST). Host 1, in its own network namespace, copies a 16 MiB file from
# SRC behind bench/slowfs (400 ms an operation: about 20 s for the file)
# with leases of 5 s; once it holds the file's claim its link to the
# database goes down. When its lease has run out, host 2 (another
# namespace) copies the job from SRC directly and marks it done. Then the
# link comes back, and host 1's copy of the file ends. Proves:
#  - host 1 does not rename its copy over host 2's: DST's file keeps the
#    inode host 2 gave it (stat), and its content is SRC's (cmp);
#  - host 1 says its claim was taken, exits 0, and leaves no temp file;
#  - host 1 stops copying at its fence: slowfs served it less than the
#    file (it went on to the end before), and DST's time (applied by
#    host 2's metadata pass) is still SRC's at the end (stat);
#  - psql: the file is done by host 2's claim, with xxh128sum's hash.
# Without the fence host 1 renamed its copy over host 2's (same bytes
# here; a SRC changed in between would have put the old content under a
# done mark). Skips, saying why, without root, network namespaces,
# PostgreSQL or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_need
need_cmd xxh128sum
need_slowfs
MNT=$T/mnt
trap 'umount_fuse "$MNT"; pg_cleanup; cleanup' EXIT

netns_three # $db and ferry-$$-w1..3, linked
pg_init
pg_start "$db" '*'

mkdir -p src
head -c 16M /dev/urandom >src/big
echo small >src/small
mkdir -p "$MNT"
"$SLOWFS" --latency-us 400000 --stats-file "$T/slow.stats" "$T/src" "$MNT" \
	2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"

spawn "$LOG/h1" host 1 --job-name fence --lease 5 -j 1 "$MNT" "$T/dst"
H1=$SPAWNED
h1="$(hostname):$H1"
holds_big() { [[ $(sql "SELECT count(*) FROM ferry.files WHERE name =
	convert_to('big', 'UTF8') AND claimed_by = '$h1' AND state = 0
	AND lease_until > now()" 2>/dev/null) == 1 ]]; }
wait_until 60 holds_big || die "host 1 never claimed big"
ip -n "ferry-$$-w1" link set "fw$$x1" down
say "host 1 cut off holding big"
sleep 7 # past its 5 s lease, on the server's clock
spawn "$LOG/h2" host 2 --job-name fence --lease 5 "$T/src" "$T/dst"
reap "$SPAWNED"
check "host 2 copies the job: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/h2.err"
ino=$(stat -c %i dst/big)
check "host 1 is still copying big (its copy takes about 20 s)" kill -0 "$H1"
ip -n "ferry-$$-w1" link set "fw$$x1" up
reap "$H1"
check "host 1 ends with exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/h1.err"
check "host 1 said its claim was taken" grep -q "another host took" "$LOG/h1.err" ||
	show "$LOG/h1.err"
check "DST's big is still host 2's copy (inode $ino; stat)" test "$(stat -c %i dst/big)" = "$ino"
check "... and holds SRC's content (cmp)" cmp -s src/big dst/big
check "no temp file is left in DST" test "$(find dst -name '*.ferry-part' | wc -l)" = 0
check "DST's time is SRC's: host 1 wrote nothing into DST after host 2's metadata pass" \
	test "$(stat -c %Y dst)" = "$(stat -c %Y src)"
sleep 0.3 # slowfs rewrites its counters within 0.1 s of a change
read_bytes=$(awk '$1 == "read_bytes" {print $2}' "$T/slow.stats")
check "host 1 stopped copying at its fence: it read $read_bytes bytes of big's 16 MiB (slowfs)" \
	test "${read_bytes:-16777216}" -lt 16777216
check "psql: big done by host 2's claim, with xxh128sum's hash" \
	test "$(sql "SELECT claimed_by <> '$h1' AND encode(hash, 'hex') = '$(xxh128sum src/big | cut -d' ' -f1)'
		FROM ferry.files WHERE name = convert_to('big', 'UTF8') AND state = 1")" = t
wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong"
[[ -z $wrong ]] || printf '%s\n' "$wrong" | show -
finish
