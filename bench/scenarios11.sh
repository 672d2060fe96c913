# shellcheck shell=bash
# shellcheck disable=SC2034,SC2153 # HOOK_PRE, SLOW_STATS... read by, R_RC... set in bench/run
# bench/scenarios11.sh - the scenarios of issue 11 (large files), sourced by
# bench/run.
#
# big1 (one big file, 4 GiB, read through slowfs at 1 ms per operation:
# ferry, ferry base, rclone with 8 streams and with its defaults, cp -a),
# big1m (the same with SRC's backing file and DST on a tmpfs: latency and
# CPU the only costs),
# resume (the same file: ferry is killed with SIGKILL at about half of it,
# then the same command again; what the resumed run reads from SRC and
# writes to DST) and targets11, the "Targets of issue 11" table (it also
# reads scenario c's table). It uses bench/run's helpers (gen_big, timed,
# fresh_copy, table, measure, ...), bench/iorun and slowfs --stats-file,
# and owns nothing else; see bench/README.md.

# ---- sizes, tools ---------------------------------------------------------

# --big-size and --resume-at (bench/run's options) win over these.
set_sizes11() {
	if [ "$QUICK" = 1 ]; then
		: "${BIG_SIZE:=256M}"
	else
		: "${BIG_SIZE:=4G}"
	fi
	: "${RESUME_AT:=50}" "${RESUME_REMOUNT:=0}"
	BIG_LATENCY_US=1000
	BIG_BYTES=$(numfmt --from=iec "$BIG_SIZE") || die "--big-size: '$BIG_SIZE' is not a size"
}

tool_label11() {
	case $1 in
	rclone-mt8) echo "rclone copy --multi-thread-streams 8 --multi-thread-cutoff 64M" ;;
	rclone-big) echo "rclone copy (defaults: local to local, one stream)" ;;
	ferry-remount) echo "ferry, SRC remounted before the resumed run" ;;
	*) echo "$1" ;;
	esac
}

tool_needs11() {
	case $1 in
	rclone-*) echo rclone ;;
	esac
}

# tool_cmd11 TOOL SRC DST MANIFEST FERRY BASE (all already quoted)
tool_cmd11() {
	local t=$1 s=$2 d=$3 m=$4 f=$5
	case $t in
	ferry-remount) echo "$f -q --manifest $m $s $d" ;;
	rclone-mt8) echo "rclone copy --config '' --multi-thread-streams 8 --multi-thread-cutoff 64M $s $d" ;;
	rclone-big) echo "rclone copy --config '' $s $d" ;;
	esac
}

# ---- slowfs counters ------------------------------------------------------

# slowfs_final FILE: after the unmount, waits until the slowfs daemon that
# wrote FILE has exited (its last rewrite, "final 1", is then in FILE).
slowfs_final() {
	local pid i
	pid=$(awk '$1 == "pid" { print $2 }' "$1" 2>/dev/null)
	[ -n "$pid" ] || return 1
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q '^final 1$' "$1"
}

# slowfs_snapshot FILE: asks the slowfs that writes FILE for a rewrite now
# (SIGUSR1) and waits for it (its seq changes); false when none came.
slowfs_snapshot() {
	local pid seq0 i
	pid=$(stat_of "$1" pid) seq0=$(stat_of "$1" seq)
	[ -n "$pid" ] && kill -USR1 "$pid" 2>/dev/null || return 1
	for i in $(seq 100); do
		[ "$(stat_of "$1" seq)" != "$seq0" ] && return 0
		sleep 0.05
	done
	return 1
}

# stat_of FILE NAME: the value of NAME in a "NAME VALUE" file (slowfs's
# stats, bench/iorun's output), empty when absent.
stat_of() {
	awk -v k="$2" '$1 == k { print $2; exit }' "$1" 2>/dev/null
}

# pct BYTES: BYTES as a percentage of the big file.
pct() {
	awk -v b="$1" -v n="$BIG_BYTES" 'BEGIN { if (b == "" || n == 0) print ""; else printf "%.1f", 100 * b / n }'
}

mount_big() {
	rm -f "$SLOW_STATS" "$SLOW_STATS.tmp"
	mount_slowfs
}

# umount_big: unmounts and adds the run's bytes read from SRC (slowfs) to
# R_SRCREAD[ID|TOOL] (BIG_KEY), in % of the file.
umount_big() {
	umount_slowfs
	local v=""
	slowfs_final "$SLOW_STATS" && v=$(pct "$(stat_of "$SLOW_STATS" read_bytes)")
	R_SRCREAD[$BIG_KEY]="${R_SRCREAD[$BIG_KEY]:-} ${v:-?}"
}

declare -A R_SRCREAD R_KILLW R_KILLR R_WB R_RB R_KILLNOTE

# big_setup ID: the big file's tree and slowfs over it; false (and a
# "Skipped" line) without FUSE.
big_setup() {
	gen_big big1 "$BIG_SIZE"
	big_setup_at "$1"
}

# big_setup_at ID: slowfs over TREE (as big_setup, TREE made already).
big_setup_at() {
	SLOW_SRC=$TREE SLOW_STATS=$WORK/slowfs-stats
	LATENCY_SAVED=$LATENCY_US
	LATENCY_US=$BIG_LATENCY_US
	if ! mounted_or_skip "$1" mount_slowfs; then
		big_done
		return 1
	fi
	umount_slowfs
}

# big_done: what big_setup changed, back as it was (later mounts count nothing).
big_done() {
	LATENCY_US=$LATENCY_SAVED SLOW_STATS=""
}

# ---- big1: one big file through slowfs ------------------------------------

# big_copies ID TOOLS...: the big file copied by each tool, REPS times, from
# slowfs over SLOW_SRC; the table and the bytes each run read from SRC.
big_copies() {
	local id=$1 t line
	shift
	HOOK_PRE=mount_big HOOK_POST=umount_big FID_OPTS=()
	for REP in $(seq "$REPS"); do
		for t in "$@"; do
			BIG_KEY="$id|$t"
			fresh_copy "$id" "$t" "$MNT" "$SLOW_SRC"
		done
	done
	HOOK_PRE="" HOOK_POST=""
	REPORT+=$(table "$id" ferry "$@")$'\n'
	line=""
	for t in "$@"; do
		[ -n "${R_SRCREAD[$id|$t]:-}" ] && line+="${line:+; }$(tool_label "$t"):${R_SRCREAD[$id|$t]} %"
	done
	[ -n "$line" ] && REPORT+=$'\n'"Read from SRC (slowfs), each run: $line."$'\n'
}

# big_tools: ferry, ferry base (with --ferry-base) and the peers (--tools).
big_tools() {
	BIG_TOOLS=(ferry)
	local peers=(rclone-mt8 rclone-big cp)
	[ -n "$FERRY_BASE" ] && BIG_TOOLS+=(base)
	[ "$TOOLS_SET" = 1 ] && peers=("${PEER_LIST[@]}")
	BIG_TOOLS+=("${peers[@]}")
}

scenario_big1() {
	section "big1) one $BIG_SIZE file through slowfs, $BIG_LATENCY_US µs per operation, cold cache, durable" \
		"Source: one file of $BIG_BYTES random bytes on ext4, read through \`slowfs --latency-us $BIG_LATENCY_US\` (remounted before every run), copied to ext4. \"ferry base\" is the binary given with \`--ferry-base\` (the single stream of before issue 11). Read from SRC: what slowfs served (\`--stats-file\`'s read_bytes), in % of the file, each run."
	big_setup big1 || return 0
	big_tools
	big_copies big1 "${BIG_TOOLS[@]}"
	big_done
	return 0
}

# ---- big1m: the same, memory-backed (latency the only cost) ----------------

BIG1M_DIR="" BIG1M_MOUNTED=0

# cleanup11: big1m's tmpfs unmounted (bench/run's cleanup, on any exit).
cleanup11() {
	[ "$BIG1M_MOUNTED" = 1 ] || return 0
	mountpoint -q "$MNT" 2>/dev/null && { fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"; }
	umount "$BIG1M_DIR" 2>/dev/null || umount -l "$BIG1M_DIR" || log "cannot unmount '$BIG1M_DIR'"
	BIG1M_MOUNTED=0
	rmdir "$BIG1M_DIR" 2>/dev/null
}

# big1m: big1 with SRC's backing file and DST on a tmpfs of their own, so
# that neither the disk nor the page cache's misses are in the time: what is
# left is slowfs's latency (and the CPU). On this bench machine big1 on ext4
# is bound by the disk's buffered write (dd conv=fdatasync of 4 GiB: 6.8 to
# 13.4 s), which hides what the streams gain.
scenario_big1m() {
	local size
	section "big1m) one $BIG_SIZE file through slowfs, $BIG_LATENCY_US µs per operation, memory-backed, durable" \
		"Source: the file of big1 copied onto a tmpfs, read through \`slowfs --latency-us $BIG_LATENCY_US\` (remounted before every run: FUSE's page cache is empty), copied to a directory on the same tmpfs (the manifest stays on the work directory's disk). No disk in the time: slowfs's latency and the CPU are the cost. Read from SRC: slowfs's read_bytes, in % of the file, each run."
	if [ "$(id -u)" != 0 ]; then
		REPORT+=$'\n'"Skipped: mounting a tmpfs needs root."$'\n'
		return 0
	fi
	gen_big big1 "$BIG_SIZE"
	BIG1M_DIR=$WORK/tmpfs-big1m
	mkdir -p "$BIG1M_DIR"
	size=$((BIG_BYTES * 2 + (512 << 20)))
	if ! mount -t tmpfs -o size="$size" tmpfs "$BIG1M_DIR"; then
		REPORT+=$'\n'"Skipped: cannot mount a tmpfs of $size bytes."$'\n'
		return 0
	fi
	BIG1M_MOUNTED=1
	mkdir -p "$BIG1M_DIR/src"
	if ! cp -a "$TREE/." "$BIG1M_DIR/src"; then
		cleanup11
		REPORT+=$'\n'"Skipped: cannot copy the file onto the tmpfs."$'\n'
		return 0
	fi
	local tree=$TREE
	TREE=$BIG1M_DIR/src
	big_setup_at big1m || { TREE=$tree; cleanup11; return 0; }
	big_tools
	DST_ROOT=$BIG1M_DIR big_copies big1m "${BIG_TOOLS[@]}"
	DST_ROOT=""
	big_done
	TREE=$tree
	cleanup11
	return 0
}

# ---- resume: kill -9 at about half, then the same command ------------------

# resume_kill ID TOOL DST MANIFEST: the interrupted run, killed (SIGKILL)
# once it has written RESUME_AT % of the file (wchar of /proc/PID/io).
# slowfs stays mounted for the resumed run (a new mount would give SRC a
# new st_dev: another source to ferry); KILL_READ is what it served so far.
resume_kill() {
	local k="$1|$2" cmd io=$WORK/io-kill.txt
	cmd=$(tool_cmd "$2" "$MNT" "$3" "$4")
	mount_big
	drop_caches
	"$IORUN" --io-out "$io" --poll 0.02 --kill-at-wchar $((BIG_BYTES * RESUME_AT / 100)) -- \
		bash -c "exec $cmd" </dev/null >"$WORK/logs/$1-$2-kill-$REP.log" 2>&1
	# requests of the killed run may still sleep their latency in slowfs
	sleep 0.2
	KILL_READ=""
	slowfs_snapshot "$SLOW_STATS" && KILL_READ=$(stat_of "$SLOW_STATS" read_bytes)
	if [ "$(stat_of "$io" killed)" != 1 ]; then
		R_KILLNOTE[$k]="${R_KILLNOTE[$k]:-} run $REP ended (rc $(stat_of "$io" status)) before it wrote $RESUME_AT %;"
	fi
	R_KILLW[$k]="${R_KILLW[$k]:-} $(pct "$(stat_of "$io" wchar)")"
	R_KILLR[$k]="${R_KILLR[$k]:-} $(pct "$KILL_READ")"
	[ "$REP" = 1 ] && R_KILLLS[$k]=$(cd "$3" && find . -type f -printf '%P: %s bytes, %b blocks of 512\n' 2>/dev/null | head -n 3 | tr '\n' ';')
	sync
}

declare -A R_KILLLS

# resume_run ID TOOL: a fresh DST and manifest, the interrupted run, then
# the resumed run (timed, under bench/iorun: its /proc/PID/io at its exit).
resume_run() {
	local id=$1 t=$2 dst=$WORK/dst-$1-$2 m=$WORK/m-$1-$2.db io=$WORK/io-resume.txt cmd k="$1|$2"
	rm -rf "$dst"
	rm_manifest "$m"
	mkdir -p "$dst"
	resume_kill "$id" "$t" "$dst" "$m"
	cmd=$(tool_cmd "$t" "$MNT" "$dst" "$m")
	R_CMD["$k"]=$(tool_cmd "$t" "$MNT" "$dst" "$m" display)
	if [ "$t" = ferry-remount ]; then
		# what a reboot does to a share: a new mount, a new st_dev
		umount_slowfs
		slowfs_final "$SLOW_STATS"
		mount_big
		KILL_READ=0
	fi
	# the same mount: drop_caches drops its FUSE page cache too
	drop_caches
	LAST_LOG="$id-$t-$REP"
	rm -f "$io"
	measure "$LAST_LOG" "$(printf %q "$IORUN") --io-out $(printf %q "$io") -- bash -c $(printf %q "exec $cmd")"
	M_RSS=$(awk '{ if ($1 > 0) printf "%.1f", $1 / 1024 }' <<<"$(stat_of "$io" hwm_kib)")
	umount_slowfs
	local total=""
	slowfs_final "$SLOW_STATS" && total=$(stat_of "$SLOW_STATS" read_bytes)
	if [ -n "$total" ] && [ -n "$KILL_READ" ]; then
		R_SRCREAD[$k]="${R_SRCREAD[$k]:-} $(pct $((total - KILL_READ)))"
	else
		R_SRCREAD[$k]="${R_SRCREAD[$k]:-} ?"
	fi
	record "$id" "$t"
	R_WB[$k]="${R_WB[$k]:-} $(pct "$(stat_of "$io" write_bytes)")"
	R_RB[$k]="${R_RB[$k]:-} $(pct "$(stat_of "$io" read_bytes)")"
	check_fidelity "$id" "$t" "$SLOW_SRC" "$dst"
	rm -rf "$dst"
	rm_manifest "$m"
}

# mcol VALUES: "median (runs)" of a list of percentages.
mcol() {
	local v
	# shellcheck disable=SC2086
	v=$(median $1)
	[ -n "$v" ] || { echo "—"; return; }
	echo "$v % (${1# })"
}

table_resume() {
	local t k label
	echo
	echo "| Tool | Killed at: written (wchar) | Killed at: read from SRC | Resumed run: median (s) | Runs (s) | Resumed: read from SRC | Resumed: written to DST (write_bytes) | Resumed: read from DST (read_bytes) | Peak RSS (MiB) | Exit | Fidelity |"
	echo "|---|---|---|---:|---|---|---|---|---:|---|---|"
	for t in "$@"; do
		k="resume|$t"
		label=$(tool_label "$t")
		if [ -z "${R_TIMES[$k]:-}" ]; then
			echo "| $label | — | — | — | — | — | — | — | — | — | ${R_NOTE[$k]:-not run} |"
			continue
		fi
		# shellcheck disable=SC2086
		echo "| $label | $(mcol "${R_KILLW[$k]:-}") | $(mcol "${R_KILLR[$k]:-}") | $(median ${R_TIMES[$k]}) | ${R_TIMES[$k]# } |" \
			"$(mcol "${R_SRCREAD[$k]:-}") | $(mcol "${R_WB[$k]:-}") | $(mcol "${R_RB[$k]:-}") | ${R_RSS[$k]:-—} |" \
			"$(rc_text "${R_RC[$k]}") | ${R_FID[$k]:-not checked} |"
	done
	echo
	for t in "$@"; do
		k="resume|$t"
		[ -n "${R_KILLNOTE[$k]:-}" ] && echo "- $(tool_label "$t"): **not killed**:${R_KILLNOTE[$k]}"
		[ -n "${R_KILLLS[$k]:-}" ] && echo "- $(tool_label "$t"), DST after the kill (run 1): ${R_KILLLS[$k]}"
	done
	echo
	echo "Commands (SRC: the slowfs mount, DST, M.db: destination, manifest; the same command twice, the first killed; the second followed by \`sync\` inside the timing):"
	echo
	for t in "$@"; do
		[ -n "${R_CMD[resume|$t]:-}" ] && echo "- $(tool_label "$t"): \`${R_CMD[resume|$t]}\`"
	done
	return 0
}

scenario_resume() {
	local t tools=(ferry)
	[ "$RESUME_REMOUNT" = 1 ] && tools+=(ferry-remount)
	[ -n "$FERRY_BASE" ] && tools+=(base)
	IORUN=$BENCH/iorun
	section "resume) one $BIG_SIZE file through slowfs ($BIG_LATENCY_US µs per operation): \`kill -9\` at about $RESUME_AT %, then the same command" \
		"For every run: a fresh DST and manifest; slowfs mounted with \`--stats-file\`; the page cache dropped; ferry started under \`bench/iorun --kill-at-wchar\`, which sends SIGKILL once ferry has written $RESUME_AT % of the file's bytes (wchar of /proc/PID/io, polled every 20 ms; \"killed at\" says where it was, written and read from SRC); slowfs stays mounted (a new mount would give SRC a new st_dev, another source to ferry): its counters are read (SIGUSR1), \`sync\`, the page cache dropped (the FUSE mount's too)$([ "$RESUME_REMOUNT" = 1 ] && echo ", except in the row \"SRC remounted\" (\`--resume-remount\`), where slowfs is unmounted and mounted again, as a reboot would do to a share: a new st_dev for the same files"); then the same command, timed, under \`bench/iorun\`, which reads its /proc/PID/io when it has exited, before it is reaped (exact totals). Percentages are of the file's $BIG_BYTES bytes, median (each run). Read from SRC: slowfs's read_bytes during the resumed run (at the unmount after it, less what it counted at the kill). Written to DST: write_bytes (what the run sent to be written: DST data, plus the manifest and its WAL). Read from DST: read_bytes (what the run read from the disk, cold cache: the DST read-back that the whole-file hash of chunks kept from the killed run needs, plus the manifest). Peak RSS: VmHWM sampled every 50 ms (bench/iorun)."
	big_setup resume || return 0
	for REP in $(seq "$REPS"); do
		for t in "${tools[@]}"; do
			usable resume "$t" || continue
			resume_run resume "$t"
		done
	done
	big_done
	REPORT+=$(table_resume "${tools[@]}")$'\n'
}

# ---- the targets of issue 11 --------------------------------------------------

T11=""

t11_row() {
	T11+="| ${1//|/\\|} | $2 | $3 | $4 |"$'\n'
}

# t11_ratio ID TOOL PEER LIMIT ROW [strict]: ferry ÷ PEER against LIMIT
# (with strict: below it).
t11_ratio() {
	local a b r v
	a=$(med_ok "$1" "$2") b=$(med_ok "$1" "$3")
	if [ -z "$a" ] || [ -z "$b" ]; then
		t11_row "$5" "not measured (a run failed or was not made)" "${6:+<}${6:-≤} $4" "—"
		return
	fi
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	if [ -n "${6:-}" ]; then
		v=$(awk -v v="$r" -v l="$4" 'BEGIN { print (v + 0 < l + 0) ? "met" : "**missed**" }')
		t11_row "$5" "**$r** ($a s vs $b s)" "< $4 ×" "$v"
	else
		t11_row "$5" "**$r** ($a s vs $b s)" "≤ $4 ×" "$(verdict "$r" "$4")"
	fi
}

# t11_rss ID TOOL ROW: the peak RSS against 16 MiB.
t11_rss() {
	local v=${R_RSS[$1|$2]:-}
	if [ -n "$v" ]; then
		t11_row "$3" "**$v MiB**" "≤ 16 MiB" "$(verdict "$v" 16)"
	else
		t11_row "$3" "not measured" "≤ 16 MiB" "—"
	fi
}

# t11_pct KEY LIST ROW: a median percentage against 55 %; not measured
# when a run was not killed (it ended first: nothing was left to resume).
t11_pct() {
	local v
	# shellcheck disable=SC2086
	v=$(median ${2:-})
	if [ -n "${R_KILLNOTE[$1]:-}" ]; then
		t11_row "$3" "not measured: a run ended before the kill (${R_KILLNOTE[$1]%;})" "≤ 55 %" "—"
	elif [ -n "$v" ] && [ "${R_RC[$1]:-1}" = 0 ]; then
		t11_row "$3" "**$v %** (runs:$2)" "≤ 55 %" "$(verdict "$v" 55)"
	else
		t11_row "$3" "not measured" "≤ 55 %" "—"
	fi
}

targets11() {
	local any=0 s v
	for s in c big1 big1m resume; do wants "$s" && any=1; done
	[ "$any" = 1 ] || return 0
	T11=""
	if wants c; then
		t11_ratio c ferry cp 1.00 "c: $C_SIZES, local, durable: ferry ÷ cp -a"
		t11_rss c ferry "c: ferry's peak RSS"
	fi
	if wants big1; then
		if [ -n "$FERRY_BASE" ]; then
			t11_ratio big1 ferry base 0.33 "big1: $BIG_SIZE through slowfs, 1 ms: ferry ÷ ferry base (\`$("$FERRY_BASE" -V 2>/dev/null | head -n 1)\`, $FERRY_BASE)"
		else
			t11_row "big1: ferry ÷ ferry base" "not measured (no --ferry-base)" "≤ 0.33 ×" "—"
		fi
		t11_ratio big1 ferry rclone-mt8 1.00 "big1: ferry ÷ rclone --multi-thread-streams 8" strict
		t11_rss big1 ferry "big1: ferry's peak RSS"
	fi
	if wants big1m; then
		if [ -n "$FERRY_BASE" ]; then
			t11_ratio big1m ferry base 0.33 "big1m: $BIG_SIZE through slowfs, 1 ms, memory-backed: ferry ÷ ferry base"
		else
			t11_row "big1m: ferry ÷ ferry base" "not measured (no --ferry-base)" "≤ 0.33 ×" "—"
		fi
		t11_ratio big1m ferry rclone-mt8 1.00 "big1m: ferry ÷ rclone --multi-thread-streams 8" strict
		t11_rss big1m ferry "big1m: ferry's peak RSS"
	fi
	if wants resume; then
		t11_pct resume\|ferry "${R_SRCREAD[resume|ferry]:-}" "resume: the resumed run's bytes read from SRC (slowfs), % of the file"
		t11_pct resume\|ferry "${R_WB[resume|ferry]:-}" "resume: the resumed run's bytes written (write_bytes), % of the file"
		# shellcheck disable=SC2086
		v=$(median ${R_RB[resume|ferry]:-})
		[ -n "$v" ] && v="$v % (runs:${R_RB[resume|ferry]})"
		t11_row "resume: the resumed run's bytes read from DST (read_bytes; the whole-file hash's read-back of kept chunks)" "${v:-not measured}" "stated, no target" "—"
		t11_rss resume ferry "resume: ferry's peak RSS (resumed run)"
		if [ "$RESUME_REMOUNT" = 1 ]; then
			t11_pct resume\|ferry-remount "${R_SRCREAD[resume|ferry-remount]:-}" "resume, SRC remounted: bytes read from SRC, % of the file"
			t11_pct resume\|ferry-remount "${R_WB[resume|ferry-remount]:-}" "resume, SRC remounted: bytes written (write_bytes), % of the file"
		fi
	fi
	section "Targets of issue 11" \
		"Same-run ratios of medians; \"met\" when the measured value is at most the target (below it for \"<\").$([ "$QUICK" = 1 ] && echo " With --quick the files are small and the verdicts mean nothing.")"
	REPORT+=$'\n'"| Row | Measured | Target | |"$'\n'"|---|---|---|---|"$'\n'"$T11"
}
