# pg-lib.sh - a throw-away PostgreSQL cluster and network namespaces for
# the tests of the shared (PostgreSQL) manifest. Source it after lib.sh.
#
# pg_need: skip unless this machine can run them (root, Debian's
#   PostgreSQL server binaries, ip(8) and network namespaces).
# pg_init: initdb in $T/pg as the unprivileged user nobody (PostgreSQL
#   refuses to run as root), superuser "ferry", trust authentication (the
#   cluster listens only on its Unix socket in $T/pg/sock and on addresses
#   inside namespaces this test made).
# pg_local_start [CMD...]: pg_need, each CMD needed, pg_init, pg_start;
#   URL is the cluster's Unix socket (a test of one host's shared job).
# pg_start [NETNS ADDR]: starts it (inside NETNS, listening on ADDR too)
#   and waits until it accepts connections; pg_stop stops it (fast
#   shutdown; SIGKILL of its own postmaster, by pid, if that fails).
# netns_add NAME: a namespace of this test, with its loopback up;
#   netns_three: the database's namespace ($db) and three workers';
#   netns_link DBNS WNS I: a veth pair between them, 10.231.I.1/30 on the
#   DBNS side, 10.231.I.2/30 on the WNS side (I in 1..250).
# pg_ns_cleanup runs from the EXIT trap, even when a test fails: the
# cluster stops and every namespace of the test goes (their veths with
# them). Nothing outside the namespaces this test made is ever contacted.
# sql QUERY: psql's rows of QUERY on the cluster's Unix socket (pg_url);
#   PG_SOCK_URL: ferry's --manifest for that socket.
# wurl I, host I ARGS...: the database's URL from worker I's namespace,
#   and ferry run there with it; spawn OUT CMD... and reap PID: a host in
#   the background and its exit status (RC).

PG_DIR=$T/pg
PG_NETNS=()
PG_STARTED=

pg_cleanup() {
	[[ -n $PG_STARTED ]] && pg_stop
	local ns
	for ns in "${PG_NETNS[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	PG_NETNS=()
}
trap 'pg_cleanup; cleanup' EXIT

pg_need() {
	[[ $(id -u) == 0 ]] || skip_all "needs root: network namespaces, and initdb as nobody"
	need_cmd ip nsenter setpriv psql
	PG_BIN=${FERRY_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
	[[ -x $PG_BIN/initdb && -x $PG_BIN/pg_ctl ]] ||
		skip_all "needs the PostgreSQL server (Debian's postgresql package; or FERRY_PG_BINDIR)"
	local probe=ferry-probe-$$
	ip netns add "$probe" 2>"$LOG/netns.err" ||
		skip_all "cannot make a network namespace: $(head -c 200 "$LOG/netns.err")"
	ip netns del "$probe"
}

# pg_slowfs_start CMD...: what a test of a shared job with SRC behind
# slowfs needs (root, PostgreSQL, slowfs and each command named), then a
# throw-away cluster started; MNT is slowfs's mount point, URL the
# cluster's; both are unmounted and stopped at the exit
pg_slowfs_start() {
	pg_need
	(($#)) && need_cmd "$@"
	need_slowfs
	MNT=$T/mnt
	trap 'umount_fuse "$MNT"; pg_cleanup; cleanup' EXIT
	pg_init
	pg_start
	URL=$PG_SOCK_URL
}

# pg_local_start [CMD...]: what a test of a shared job on this host alone
# needs (root, PostgreSQL, network namespaces, and each command named),
# then a throw-away cluster started; URL is its Unix socket's
pg_local_start() {
	pg_need
	(($#)) && need_cmd "$@"
	pg_init
	pg_start
	URL=$PG_SOCK_URL
}

# two_hosts ARGS...: the test's fy ARGS (its one host's command) run
# twice at once, its output in $T/h1.out and $T/h2.out (.err); R1 and R2
# their exit codes. With TWO_HOSTS_JOB (fy's --job-name) naming a job that
# exists, both join it while it is paused (ferry set) and it resumes once
# psql shows both running: a host started late (a loaded machine,
# ThreadSanitizer) would find the run over and run the job again, a new
# generation with nothing to do. A job made by this very command cannot
# be paused before; a test checks nothing there that a late host changes.
two_hosts() {
	local p1 p2 job=${TWO_HOSTS_JOB:-} paused=
	if [[ -n $job && $(sql "SELECT count(*) FROM ferry.jobs WHERE name = '$job'") == 1 ]]; then
		"$FERRY" set --manifest "$URL" --job-name "$job" --pause >"$LOG/set" 2>&1 ||
			die "ferry set --pause failed: $(cat "$LOG/set")"
		paused=1
	fi
	spawn "$T/h1.out" fy "$@"
	p1=$SPAWNED
	spawn "$T/h2.out" fy "$@"
	p2=$SPAWNED
	if [[ -n $paused ]]; then
		local i n=0
		for i in $(seq 1 $((600 * SLOW))); do
			n=$(sql "SELECT count(*) FROM ferry.hosts h JOIN ferry.jobs j ON j.id = h.job
				WHERE j.name = '$job' AND h.left_at IS NULL")
			[[ $n == 2 ]] && break
			sleep 0.05
		done
		[[ $n == 2 ]] || die "the two hosts did not both join the paused job '$job' ($n running)"
		"$FERRY" set --manifest "$URL" --job-name "$job" --resume >"$LOG/set" 2>&1 ||
			die "ferry set --resume failed: $(cat "$LOG/set")"
	fi
	reap "$p1"
	R1=$RC
	reap "$p2"
	R2=$RC
}

# as_pg CMD...: CMD as nobody, in $PG_DIR
as_pg() {
	(cd "$PG_DIR" && setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@")
}

pg_init() {
	mkdir -p "$PG_DIR/sock" && chown -R nobody:nogroup "$PG_DIR" || die "cannot make $PG_DIR"
	as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U ferry --auth=trust -E UTF8 \
		--no-sync >"$LOG/initdb.out" 2>&1 || {
		show "$LOG/initdb.out"
		die "initdb failed"
	}
	# the workers' links: 10.231.I.2 of netns_link (a namespace of this test)
	echo 'host all ferry 10.231.0.0/16 trust' >>"$PG_DIR/data/pg_hba.conf"
}

# in_netns NAME CMD...: CMD in network namespace NAME, and in this mount
# namespace. Not `ip netns exec`: it also makes a new mount namespace,
# a private copy of every mount of the moment, which on a machine whose /
# is not shared keeps the file systems other tests mount and unmount alive
# as long as CMD runs (a long-lived postmaster): t33's XFS, shut down,
# unmounted and mounted again, came back still shut down (EIO).
in_netns() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" -- "$@"
}

pg_start() {
	local ns=${1-} addr=${2-} run=()
	[[ -n $ns ]] && run=(in_netns "$ns")
	"${run[@]}" setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
		"$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 60 \
		-o "-k $PG_DIR/sock -c listen_addresses='$addr' -c port=5432" \
		start >"$LOG/pg_ctl.out" 2>&1 || {
		show "$LOG/pg_ctl.out"
		show "$PG_DIR/log"
		die "the PostgreSQL cluster did not start"
	}
	PG_STARTED=1
}

# pg_pid: the postmaster's pid (first line of postmaster.pid)
pg_pid() { head -1 "$PG_DIR/data/postmaster.pid" 2>/dev/null; }

pg_stop() {
	local pid
	pid=$(pg_pid)
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 30 stop \
		>"$LOG/pg_stop.out" 2>&1 ||
		{ [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; }
	PG_STARTED=
}

# pg_gone PID: the process has ended (gone, or a zombie not yet reaped)
pg_gone() {
	[[ ! -e /proc/$1 || $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]]
}

# pg_url [HOST]: a libpq connection string to the test database (the
# socket directory, or an address)
pg_url() { printf 'host=%s port=5432 user=ferry dbname=postgres connect_timeout=3' "${1:-$PG_DIR/sock}"; }
# sql QUERY: psql's unaligned rows of QUERY on the cluster's Unix socket
sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 -c "$1" "$(pg_url)"; }
# PG_SOCK_URL: ferry's --manifest for the cluster's Unix socket
PG_SOCK_URL="postgresql://ferry@/postgres?host=$PG_DIR/sock&port=5432"

# wurl I: the database's URL from worker I's namespace (netns_link I).
wurl() { printf 'postgresql://ferry@10.231.%s.1:5432/postgres' "$1"; }
# host I ARGS...: becomes ferry in worker I's network namespace, on its
# link's address (nsenter execs it: the pid is the spawner's)
host() {
	local i=$1
	shift
	exec nsenter --net="/run/netns/ferry-$$-w$i" -- "$FERRY" \
		--manifest "$(wurl "$i")" "$@"
}
# spawn OUT CMD...: in the background; SPAWNED its pid (killed by the
# trap if the test dies). reap PID: RC its exit status.
spawn() {
	local out=$1
	shift
	"$@" >"$out" 2>"$out.err" &
	SPAWNED=$!
	BG_PIDS+=("$SPAWNED")
}
reap() {
	wait "$1" 2>/dev/null
	RC=$?
}

netns_add() {
	ip netns add "$1" || die "cannot add network namespace $1"
	PG_NETNS+=("$1")
	ip -n "$1" link set lo up
}

netns_link() {
	local db=$1 w=$2 i=$3
	local a=fd$$x$i b=fw$$x$i
	ip link add "$a" netns "$db" type veth peer name "$b" netns "$w" ||
		die "cannot add a veth pair $a/$b"
	ip -n "$db" addr add "10.231.$i.1/30" dev "$a"
	ip -n "$w" addr add "10.231.$i.2/30" dev "$b"
	ip -n "$db" link set "$a" up
	ip -n "$w" link set "$b" up
}

# netns_three: the database's namespace (its name in db) and three
# workers' ferry-$$-w1..3, each linked to it by netns_link I
netns_three() {
	local i
	db=ferry-$$-db
	netns_add "$db"
	for i in 1 2 3; do
		netns_add "ferry-$$-w$i"
		netns_link "$db" "ferry-$$-w$i" "$i"
	done
}

# pg_counts_wrong [DB]: the jobs whose counts (sql/pg/005_counts.sql,
# what status and the progress line read) are not what psql counts of
# their rows, each with both; nothing when every job's are right
pg_counts_wrong() {
	psql -X -A -t -q -v ON_ERROR_STOP=1 "$(pg_url) dbname=${1:-postgres}" -c "
	WITH k AS (SELECT job, sum(files) f, sum(bytes) b, sum(files_pending) p,
	  sum(files_done) d, sum(bytes_done) bd, sum(files_failed) fl,
	  sum(files_vanished) v, sum(dirs) n, sum(dirs_to_list) l,
	  sum(dirs_list_failed) lf, sum(dirs_to_apply) a,
	  sum(dirs_meta_failed) mf FROM ferry.counts GROUP BY job),
	r AS (SELECT j.id AS job,
	  (SELECT count(*) FROM ferry.files WHERE job = j.id AND state <> 5) f,
	  (SELECT coalesce(sum(size), 0) FROM ferry.files
	   WHERE job = j.id AND state <> 5) b,
	  (SELECT count(*) FROM ferry.files WHERE job = j.id AND state = 0) p,
	  (SELECT count(*) FROM ferry.files WHERE job = j.id AND state = 1) d,
	  (SELECT coalesce(sum(size), 0) FROM ferry.files
	   WHERE job = j.id AND state = 1) bd,
	  (SELECT count(*) FROM ferry.files WHERE job = j.id AND state = 2) fl,
	  (SELECT count(*) FROM ferry.files WHERE job = j.id AND state = 4) v,
	  (SELECT count(*) FROM ferry.dirs WHERE job = j.id) n,
	  (SELECT count(*) FROM ferry.dirs WHERE job = j.id AND list_state = 0) l,
	  (SELECT count(*) FROM ferry.dirs WHERE job = j.id AND list_state = 2) lf,
	  (SELECT count(*) FROM ferry.dirs
	   WHERE job = j.id AND list_state = 1 AND state = 0) a,
	  (SELECT count(*) FROM ferry.dirs WHERE job = j.id AND state = 2) mf
	  FROM ferry.jobs j)
	SELECT j.name, 'counts', k.f, k.b, k.p, k.d, k.bd, k.fl, k.v, k.n, k.l,
	  k.lf, k.a, k.mf, 'rows', r.f, r.b, r.p, r.d, r.bd, r.fl, r.v, r.n, r.l,
	  r.lf, r.a, r.mf
	FROM r JOIN ferry.jobs j ON j.id = r.job LEFT JOIN k ON k.job = r.job
	WHERE (coalesce(k.f, 0), coalesce(k.b, 0), coalesce(k.p, 0),
	  coalesce(k.d, 0), coalesce(k.bd, 0), coalesce(k.fl, 0),
	  coalesce(k.v, 0), coalesce(k.n, 0), coalesce(k.l, 0),
	  coalesce(k.lf, 0), coalesce(k.a, 0), coalesce(k.mf, 0))
	  IS DISTINCT FROM (r.f, r.b, r.p, r.d, r.bd, r.fl, r.v, r.n, r.l, r.lf,
	  r.a, r.mf)"
}
