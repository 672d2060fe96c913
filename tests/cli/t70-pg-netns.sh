#!/bin/bash
# t70-pg-netns: the parts the shared-manifest tests stand on (issue 14):
# a throw-away PostgreSQL cluster run by an unprivileged user, in a network
# namespace of its own, reached by workers in three more namespaces over
# veth pairs, one link cut and restored, the server restarted. Proves:
#  - initdb and the postmaster run as nobody, never as root;
#  - psql reaches the cluster on its Unix socket, and from each worker
#    namespace at its address on that worker's link;
#  - from the test's own namespace the cluster's addresses are not
#    reachable (nothing outside the namespaces is contacted);
#  - a link set down cuts exactly that worker off (its connection fails
#    within connect_timeout; the others still connect), and set up again
#    it connects again;
#  - after a restart (fast shutdown, start) every worker connects again;
#  - the stop leaves no postmaster, and the namespaces are removed.
# Skips, saying why, without root, ip(8), network namespaces or Debian's
# PostgreSQL server binaries.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_need

netns_three # $db and ferry-$$-w1..3, linked
pg_init
# '*': every address of the database's own namespace (lo and its veths)
pg_start "$db" '*'

user=$(ps -o user= -p "$(pg_pid)")
check "the postmaster runs as nobody (ps says '$user')" test "$user" = nobody
# a mount namespace of its own would hold other tests' mounts (pg-lib.sh)
check "the postmaster shares this mount namespace" \
	test "$(readlink "/proc/$(pg_pid)/ns/mnt")" = "$(readlink /proc/self/ns/mnt)"
check "... and runs in the database's network namespace" \
	test "$(readlink "/proc/$(pg_pid)/ns/net")" = "net:[$(stat -L -c %i "/run/netns/$db")]"

# query [NETNS] HOST: the result of SELECT 41 + 1 there
query() {
	local run=()
	if [[ $# == 2 ]]; then
		run=(in_netns "$1")
		shift
	fi
	"${run[@]}" psql -X -A -t -c 'SELECT 41 + 1' "$(pg_url "$1")" 2>"$LOG/psql.err"
}

check "psql reaches the cluster on its Unix socket" test "$(query "$PG_DIR/sock")" = 42
for i in 1 2 3; do
	check "worker $i reaches the cluster at 10.231.$i.1" \
		test "$(query "ferry-$$-w$i" "10.231.$i.1")" = 42
done
check "worker 1 does not reach worker 2's link (10.231.2.1)" \
	test -z "$(query "ferry-$$-w1" 10.231.2.1)"
check "the test's own namespace does not reach 10.231.1.1" \
	test -z "$(query 10.231.1.1)"

ip -n "ferry-$$-w2" link set "fw$$x2" down
t0=$SECONDS
check "worker 2's link down: it cannot connect" test -z "$(query "ferry-$$-w2" 10.231.2.1)"
check "worker 2's failed connect ended within 10 s" test $((SECONDS - t0)) -le 10
check "worker 2's link down: worker 1 still connects" \
	test "$(query "ferry-$$-w1" 10.231.1.1)" = 42
check "worker 2's link down: worker 3 still connects" \
	test "$(query "ferry-$$-w3" 10.231.3.1)" = 42
ip -n "ferry-$$-w2" link set "fw$$x2" up
w2_answers() { [[ $(query "ferry-$$-w2" 10.231.2.1) == 42 ]]; }
wait_until 10 w2_answers
check "worker 2's link up again: it connects again" \
	test "$(query "ferry-$$-w2" 10.231.2.1)" = 42

old=$(pg_pid)
pg_stop
check "the stopped cluster refuses connections" test -z "$(query "$PG_DIR/sock")"
wait_until 10 pg_gone "$old"
check "the stop left no postmaster ($old)" pg_gone "$old"
pg_start "$db" '*'
for i in 1 2 3; do
	check "after a restart worker $i connects again" \
		test "$(query "ferry-$$-w$i" "10.231.$i.1")" = 42
done

pid=$(pg_pid)
pg_cleanup
wait_until 10 pg_gone "$pid"
check "pg_cleanup stops the postmaster ($pid)" pg_gone "$pid"
check "pg_cleanup removes the test's namespaces" \
	test -z "$(ip netns list | grep -F "ferry-$$-")"
finish
