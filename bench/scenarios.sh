# shellcheck shell=bash
# shellcheck disable=SC2034 # UNIT, MEASURE_INNER, FID_OPTS...: read by bench/run
# bench/scenarios.sh - the scenarios of issue 13, sourced by bench/run.
#
# b3 and b5 (3,000 files through slowfs at 1 and 5 ms per operation), nd
# (a no-op re-run onto a DST through slowfs at 5 ms), s and
# n (20,000 files local: first copy, no-op re-run), farm (5,000 files x 21
# `cp -al` snapshots), one (a 1-file job: time, sync calls, threads), x
# (onto exFAT through exfat-fuse on a loop image), jauto (runs bench/jauto)
# and targets13, the "Targets of issue 13" table after all tables. It uses
# bench/run's helpers (gen_tree, copy_scenario, timed, table, ...) and owns
# nothing else; see bench/README.md for the scenarios and their targets.

# ---- sizes, tools ---------------------------------------------------------

set_sizes13() {
	if [ "$QUICK" = 1 ]; then
		B3_FILES=100 S_FILES=500 FARM_FILES=100 FARM_SNAPS=3 ONE_REPS=3 ND_FILES=100
		X_FILES=200 X_IMG=256M
	else
		B3_FILES=3000 S_FILES=20000 FARM_FILES=5000 FARM_SNAPS=21 ONE_REPS=11
		# rsync's first copy onto a 5 ms share is one file at a time
		ND_FILES=1000
		X_FILES=5000 X_IMG=1G
	fi
	# issue 13: ferry of f9081c4 took 2.94 s in b5; the target is half of it
	B5_BASE_SECS=2.94 B5_LIMIT_SECS=1.47
}

tool_label13() {
	case $1 in
	ferry-n) echo "ferry -n (scan only)" ;;
	base | base-one) echo "ferry base" ;;
	base-noop) echo "ferry base (no-op re-run)" ;;
	rsync-H) echo "rsync -aH" ;;
	ferry-x) echo "ferry --no-owner --no-perms --no-hard-links" ;;
	base-x) echo "ferry base --no-owner --no-perms --no-hard-links" ;;
	cp-r) echo "cp -r" ;;
	rsync-r) echo "rsync -r" ;;
	xargs-dirs) echo "find | xargs -P 50 cp (dirs made first)" ;;
	ferry-one) echo "ferry" ;;
	cp-one) echo "cp -a, then sync FILE DIR" ;;
	*) tool_label11 "$1" ;;
	esac
}

tool_needs13() {
	case $1 in
	cp-r) echo cp ;;
	cp-one) echo "cp sync" ;;
	xargs-dirs) echo "find xargs cp mkdir" ;;
	*) tool_needs11 "$1" ;;
	esac
}

# tool_cmd13 TOOL SRC DST MANIFEST FERRY BASE (all already quoted)
tool_cmd13() {
	local t=$1 s=$2 d=$3 m=$4 f=$5 b=$6
	case $t in
	ferry-n) echo "$f -n -q --manifest $m $s $d" ;;
	ferry-one) echo "$f -q --manifest $m $s $d" ;;
	base | base-noop | base-one) echo "$b -q --manifest $m $s $d" ;;
	rsync-H) echo "rsync -aH $s/ $d/" ;;
	ferry-x) echo "$f --no-owner --no-perms --no-hard-links -q --manifest $m $s $d" ;;
	base-x) echo "$b --no-owner --no-perms --no-hard-links -q --manifest $m $s $d" ;;
	cp-r) echo "cp -r $s/. $d" ;;
	rsync-r) echo "rsync -r $s/ $d/" ;;
	xargs-dirs) echo "cd $s && find . -mindepth 1 -type d -print0 | (cd $d && xargs -0 mkdir -p) &&" \
		"find . -type f -print0 | xargs -0 -P 50 -I{} cp --parents {} $d/" ;;
	cp-one) echo "cp -a $s/. $d && sync $d/$ONE_NAME $d" ;;
	*) tool_cmd11 "$t" "$s" "$d" "$m" "$f" "$b" ;;
	esac
}

# tools13 ID: sets TOOLS13, the rows of a copy scenario. An explicit --tools
# replaces the peers of b3, b5, s and farm.
tools13() {
	local base=() peers=()
	[ -n "$FERRY_BASE" ] && base=(base)
	case $1 in
	b3) peers=(rclone32 rclone8 xargs cp tar rsync fpsync) ;;
	b5) peers=(rclone32 rclone8 xargs) ;;
	s) peers=(tar cp) ;;
	farm) peers=(cp tar rsync-H) ;;
	esac
	if [ "$QUICK" = 1 ]; then
		case $1 in
		b3 | b5) peers=(rclone32) ;;
		s) peers=(tar) ;;
		farm) peers=(cp) ;;
		esac
	fi
	[ "$TOOLS_SET" = 1 ] && peers=("${PEER_LIST[@]}")
	case $1 in
	b3 | b5) TOOLS13=(ferry ferry-n "${base[@]}" "${peers[@]}") ;;
	*) TOOLS13=(ferry "${base[@]}" "${peers[@]}") ;;
	esac
}

# check_untouched ID TOOL DST: a dry run (-n) must leave DST empty.
check_untouched() {
	local first
	first=$(find "$3" -mindepth 1 -print -quit 2>/dev/null)
	if [ -n "$first" ]; then
		R_FID["$1|$2"]="DST written by a dry run: ${first#"$3"/}"
		ferry_failed "[$1] ferry -n wrote into DST: $first"
	else
		R_FID["$1|$2"]="DST untouched (dry run)"
	fi
}

# ---- b3, b5: a small tree through slowfs --------------------------------

latency_scenario() {
	local id=$1 lat=$2 saved=$LATENCY_US
	gen_tree b3k --seed 1 --files "$B3_FILES"
	SLOW_SRC=$TREE
	section "$id) $B3_FILES files through slowfs, $lat µs per operation" \
		"Source: $(tree_desc b3k), read through \`slowfs --latency-us $lat\` (FUSE, remounted before every run), copied to ext4. \`ferry -n\` (dry run: the scan alone, nothing copied; checked: DST stays empty) shows how much of ferry's time the scan takes."
	LATENCY_US=$lat
	if ! mounted_or_skip "$id" mount_slowfs; then
		LATENCY_US=$saved
		return
	fi
	umount_slowfs
	tools13 "$id"
	HOOK_PRE=mount_slowfs HOOK_POST=umount_slowfs FID_OPTS=()
	copy_scenario "$id" ferry "$MNT" "$SLOW_SRC" "${TOOLS13[@]}"
	HOOK_PRE="" HOOK_POST=""
	LATENCY_US=$saved
	[ "$id" = b5 ] && [ "$QUICK" = 0 ] && [ "$TOOLS_SET" = 0 ] &&
		REPORT+=$'\n'"cp -a, tar and rsync -a (one file at a time: minutes per run at 5 ms) and fpsync are left out of b5; \`--tools\` runs them."$'\n'
	return 0
}

scenario_b3() { latency_scenario b3 1000; }
scenario_b5() { latency_scenario b5 5000; }

# ---- nd: a no-op re-run onto a destination share ---------------------------

# nd: a tree like b3's copied onto a DST through `slowfs --writable` at 5 ms, then
# the same command again: what a nightly re-run to a NAS pays before it
# finds nothing to do (ferry: the scan of SRC and its sample of DST; rsync
# -a stats every DST entry).
scenario_nd() {
	local saved=$LATENCY_US base=()
	gen_tree nd --seed 1 --files "$ND_FILES"
	[ -n "$FERRY_BASE" ] && base=(base-noop)
	section "nd) no-op re-run of $ND_FILES files onto a DST through slowfs --writable, 5000 µs per operation" \
		"Source: $(tree_desc nd), on ext4; the destination is \`slowfs --writable --latency-us 5000\` over ext4, remounted before every run (FUSE's caches empty). After a first copy (not timed), the same command again: nothing to copy."
	LATENCY_US=5000 DST_MNT=$WORK/mnt-nd DST_BACK=$WORK/dst-nd
	if mounted_or_skip nd mount_dst; then
		umount_dst
		HOOK_PRE=mount_dst HOOK_POST=umount_dst
		NOOP_DST=$DST_MNT NOOP_DST_BACK=$DST_BACK noop_scenario nd "$TREE" "$TREE" "${base[@]}"
		HOOK_PRE="" HOOK_POST=""
	fi
	LATENCY_US=$saved
}

# ---- s, n: a small local tree ------------------------------------------------

tree_s() {
	gen_tree s --seed 1 --files "$S_FILES"
}

scenario_s() {
	tree_s
	section "s) $S_FILES files, ext4 → ext4, cold cache, durable" \
		"Source: $(tree_desc s). Fresh empty destination for every run."
	tools13 s
	HOOK_PRE="" HOOK_POST="" FID_OPTS=()
	copy_scenario s ferry "$TREE" "$TREE" "${TOOLS13[@]}"
}

scenario_n() {
	local base=()
	tree_s
	[ -n "$FERRY_BASE" ] && base=(base-noop)
	section "n) no-op re-run of s) ($S_FILES files), cold cache" \
		"After a first copy (not timed), the same command again: nothing to copy."
	HOOK_PRE="" HOOK_POST=""
	noop_scenario n "$TREE" "$TREE" "${base[@]}"
}

# ---- farm: hardlinked snapshots --------------------------------------------

# gen_farm: $WORK/src-farm holds snap01 (gentree) and FARM_SNAPS - 1 `cp -al` of it.
gen_farm() {
	local dir=$WORK/src-farm i
	local stamp="farm --seed 10 --files $FARM_FILES --no-links --median 8K --max-size 2M x $FARM_SNAPS"
	TREE=$dir
	[ -f "$dir.stamp" ] && [ "$(cat "$dir.stamp")" = "$stamp" ] && return 0
	rm -rf "$dir" "$dir.stamp"
	mkdir -p "$dir" || die "cannot create '$dir'"
	log "generating farm: $stamp"
	"$GENTREE" --seed 10 --files "$FARM_FILES" --no-links --median 8K --max-size 2M "$dir/snap01" \
		>"$WORK/logs/gentree-farm.log" || die "gentree failed: $(cat "$WORK/logs/gentree-farm.log")"
	for i in $(seq 2 "$FARM_SNAPS"); do
		cp -al "$dir/snap01" "$dir/$(printf snap%02d "$i")" || die "cp -al failed"
	done
	touch -d @1600000000.5 "$dir"
	echo "$stamp" >"$dir.stamp"
}

scenario_farm() {
	gen_farm
	section "farm) snapshot farm: $FARM_FILES files × $FARM_SNAPS \`cp -al\` snapshots, first copy, ext4 → ext4, cold cache, durable" \
		"Source: snap01 is $(tree_desc farm); snap02 to $(printf snap%02d "$FARM_SNAPS") are \`cp -al\` of it: $((FARM_FILES * FARM_SNAPS)) names (of files, symlinks and hardlinks) on the inodes of one tree. Fresh empty destination for every run; the fidelity check counts every hardlink that DST does not share."
	tools13 farm
	HOOK_PRE="" HOOK_POST="" FID_OPTS=()
	copy_scenario farm ferry "$TREE" "$TREE" "${TOOLS13[@]}"
}

# ---- one: a 1-file job -------------------------------------------------------

ONE_NAME=one.dat
declare -A R_SYNCS R_CLONES

# count_calls ID TOOL SRC DST MANIFEST: one more run under strace -f -c.
count_calls() {
	local k="$1|$2" out=$WORK/logs/strace-$1-$2.txt cmd
	cmd=$(tool_cmd "$2" "$3" "$4" "$5")
	env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -f -c -U name,calls -o "$out" \
		-e trace=fsync,fdatasync,syncfs,sync_file_range,msync,sync,clone,clone3 \
		bash -c "$cmd" >"$WORK/logs/strace-$1-$2.log" 2>&1 ||
		{ R_SYNCS[$k]="strace failed (rc $?)"; return 0; }
	R_SYNCS[$k]=$(awk '$1 ~ /^(fsync|fdatasync|syncfs|sync_file_range|msync|sync)$/ {
			n += $2; s = s (s == "" ? "" : " + ") $2 " " $1 }
		END { printf "%d%s", n, (s == "" ? "" : " (" s ")") }' "$out")
	R_CLONES[$k]=$(awk '$1 ~ /^(clone|clone3)$/ { n += $2 } END { print n + 0 }' "$out")
}

table_one() {
	local t k times med ratio refmed ref="one|ferry-one"
	echo
	echo "| Tool | Median (ms) | Runs (ms) | ferry ÷ tool | Sync calls | clone/clone3 calls | Peak RSS (MiB) | Exit | Fidelity |"
	echo "|---|---:|---|---:|---|---:|---:|---|---|"
	for t in "$@"; do
		k="one|$t" times=${R_TIMES[$k]:-} ratio="—"
		if [ -z "$times" ]; then
			echo "| $(tool_label "$t") | — | — | — | — | — | — | — | ${R_NOTE[$k]:-not run} |"
			continue
		fi
		# shellcheck disable=SC2086
		med=$(median $times)
		if [ -n "${R_TIMES[$ref]:-}" ] && [ "${R_RC[$ref]:-1}" = 0 ] && [ "${R_RC[$k]}" = 0 ]; then
			# shellcheck disable=SC2086
			refmed=$(median ${R_TIMES[$ref]})
			ratio=$(awk -v f="$refmed" -v t="$med" 'BEGIN { if (t > 0) printf "%.2f", f / t; else print "—" }')
		fi
		echo "| $(tool_label "$t") | $med | ${times# } | $ratio | ${R_SYNCS[$k]:-—} | ${R_CLONES[$k]:-—} |" \
			"${R_RSS[$k]:-—} | $(rc_text "${R_RC[$k]}") | ${R_FID[$k]:-not checked} |"
	done
	echo
	echo "Commands (SRC, DST, M.db: source, destination, manifest; no final \`sync\`, see above):"
	echo
	for t in "$@"; do
		[ -n "${R_CMD[one|$t]:-}" ] && echo "- $(tool_label "$t"): \`${R_CMD[one|$t]}\`"
	done
	return 0
}

scenario_one() {
	local src=$WORK/src-one dst=$WORK/dst-one m=$WORK/m-one.db t tools=(ferry-one)
	[ -n "$FERRY_BASE" ] && tools+=(base-one)
	tools+=(cp-one)
	if [ ! -f "$src/$ONE_NAME" ]; then
		mkdir -p "$src" || die "cannot create '$src'"
		yes 'ferry one-file job' | head -c 4096 >"$src/$ONE_NAME"
		chmod 0644 "$src/$ONE_NAME"
		touch -d @1600000000.123456789 "$src/$ONE_NAME"
		touch -d @1600000000.5 "$src"
	fi
	section "one) a 1-file job (4 KiB), ext4 → ext4, warm cache" \
		"Median of $ONE_REPS runs, the tools interleaved, each into a fresh empty DST (and manifest). The time is taken inside the shell that runs the command (bash's \`EPOCHREALTIME\` just before and just after it), with no final global \`sync\` (on a shared machine it would time the other jobs' writes): ferry makes its copy durable itself, and cp's command fsyncs the file and DST with \`sync FILE DIR\`. The page cache is not dropped: a cold start would time the loading of the binaries from disk. Then one more run of each under \`strace -f -c\` counts the sync calls (fsync, fdatasync, syncfs, sync_file_range, msync, sync) and clone/clone3 (ferry: the threads it starts; cp's command: bash's forks of cp and sync)."
	UNIT=ms MEASURE_INNER=1
	for REP in $(seq "$ONE_REPS"); do
		for t in "${tools[@]}"; do
			usable one "$t" || continue
			rm -rf "$dst"
			rm_manifest "$m"
			mkdir -p "$dst"
			R_CMD["one|$t"]=$(tool_cmd "$t" "$src" "$dst" "$m" display)
			LAST_LOG="one-$t-$REP"
			measure "$LAST_LOG" "$(tool_cmd "$t" "$src" "$dst" "$m")"
			record one "$t"
			if [ "$REP" = 1 ] || [[ $t == ferry* ]]; then
				check_fidelity one "$t" "$src" "$dst"
			fi
		done
	done
	UNIT=s MEASURE_INNER=0
	for t in "${tools[@]}"; do
		usable one "$t" || continue
		if ! command -v strace >/dev/null; then
			R_SYNCS["one|$t"]="strace not installed"
			continue
		fi
		rm -rf "$dst"
		rm_manifest "$m"
		mkdir -p "$dst"
		count_calls one "$t" "$src" "$dst" "$m"
	done
	rm -rf "$dst"
	rm_manifest "$m"
	REPORT+=$(table_one "${tools[@]}")$'\n'
}

# ---- x: onto exFAT --------------------------------------------------------------

X_LOOP="" X_MNT="" X_IMG_FILE="" X_WHY="" X_SYMLINKS=0

x_umount() {
	local i
	[ -n "$X_MNT" ] || return 0
	for i in 1 2 3 4 5 6 7 8 9 10; do
		mountpoint -q "$X_MNT" 2>/dev/null || return 0
		fusermount3 -u "$X_MNT" 2>/dev/null || umount "$X_MNT" 2>/dev/null || sleep 0.5
	done
	log "cannot unmount '$X_MNT'"
	return 1
}

# cleanup13: unmounts the exFAT image and detaches its loop device (EXIT trap).
cleanup13() {
	x_umount
	if [ -n "$X_LOOP" ]; then
		losetup -d "$X_LOOP" 2>/dev/null || log "cannot detach '$X_LOOP'"
		X_LOOP=""
	fi
	[ -z "$X_IMG_FILE" ] || rm -f "$X_IMG_FILE"
}

# x_setup: the image and its loop device, or false with X_WHY.
x_setup() {
	local c
	if [ "$(id -u)" != 0 ]; then
		X_WHY="needs root (losetup, mount)"
		return 1
	fi
	[ -c /dev/fuse ] || { X_WHY="no /dev/fuse"; return 1; }
	for c in losetup mkfs.exfat mount.exfat-fuse fusermount3; do
		command -v "$c" >/dev/null || { X_WHY="$c is not installed (packages exfatprogs, exfat-fuse, fuse3)"; return 1; }
	done
	X_IMG_FILE=$WORK/exfat.img X_MNT=$WORK/mnt-exfat
	mkdir -p "$X_MNT"
	# what a killed earlier run in the same --workdir left: its mount and
	# the loop devices on its image (only those)
	x_umount || { X_WHY="cannot unmount '$X_MNT'"; return 1; }
	[ -e "$X_IMG_FILE" ] && for c in $(losetup -n -O NAME -j "$X_IMG_FILE" 2>/dev/null); do
		losetup -d "$c" || log "cannot detach '$c'"
	done
	rm -f "$X_IMG_FILE"
	truncate -s "$X_IMG" "$X_IMG_FILE" || { X_WHY="cannot create the image"; return 1; }
	X_LOOP=$(losetup --find --show "$X_IMG_FILE" 2>"$WORK/logs/losetup.log") || {
		X_LOOP="" X_WHY="no loop device: $(head -c 200 "$WORK/logs/losetup.log")"
		return 1
	}
}

# x_fresh: a new empty exFAT on the loop device, mounted at X_MNT.
x_fresh() {
	x_umount || { X_WHY="cannot unmount '$X_MNT'"; return 1; }
	mkfs.exfat "$X_LOOP" >"$WORK/logs/mkfs-exfat.log" 2>&1 ||
		{ X_WHY="mkfs.exfat failed: $(head -c 200 "$WORK/logs/mkfs-exfat.log")"; return 1; }
	mount.exfat-fuse "$X_LOOP" "$X_MNT" >"$WORK/logs/mount-exfat.log" 2>&1 ||
		{ X_WHY="mount.exfat-fuse failed: $(head -c 200 "$WORK/logs/mount-exfat.log")"; return 1; }
	mountpoint -q "$X_MNT" || { X_WHY="exfat-fuse did not mount"; return 1; }
}

# x_rc_ok ID TOOL (RC_OK_FN): ferry's exit 23 (cp -r's exit 1) on exFAT is
# no failure when the entries it lists as failed are exactly as many as
# SRC's symlinks (exFAT has none) and its log holds nothing else; the
# fidelity check then finds whatever else went missing.
x_rc_ok() {
	local n all logf=$WORK/logs/$LAST_LOG.log
	case $2:$M_RC in
	ferry-x:23 | base-x:23)
		n=$(grep -c "^ferry: failed: " "$logf")
		all=$(grep -c -v "^ferry: some files failed" "$logf")
		;;
	cp-r:1)
		n=$(grep -c "^cp: cannot create symbolic link " "$logf")
		all=$(grep -c . "$logf")
		;;
	*) return 1 ;;
	esac
	[ "$n" = "$X_SYMLINKS" ] && [ "$all" = "$n" ] || return 1
	R_RCTEXT["$1|$2"]="$M_RC: the $n symlinks failed (exFAT has none)"
}

scenario_x() {
	local src t tools=(ferry-x) dst m=$WORK/m-x.db
	gen_tree x --seed 1 --files "$X_FILES"
	src=$TREE
	[ -n "$FERRY_BASE" ] && tools+=(base-x)
	tools+=(cp-r rsync-r xargs-dirs)
	section "x) $X_FILES files onto exFAT (exfat-fuse on a loop image), cold cache" \
		"Source: $(tree_desc x), on ext4. DST: a $X_IMG image on a loop device, \`mkfs.exfat\` (exfatprogs' defaults) before every run, mounted with \`mount.exfat-fuse\`; the manifest stays on ext4. ferry runs with the options its man page gives for exFAT. exFAT cannot hold modes, owners, symlinks, hardlinks, xattrs, ACLs or special files, and exfat-fuse keeps whole seconds of mtime: the Fidelity column lists those apart (\`bench/fidelity --exfat\`) and counts as lost only what exFAT can hold (contents, files, directories, mtimes to the second). cp -r exits 1 and rsync -r skips (\"skipping non-regular file\") on the same symlinks."
	if ! x_setup; then
		REPORT+=$'\n'"Skipped: $X_WHY."$'\n'
		log "x: skipped: $X_WHY"
		cleanup13
		return
	fi
	X_SYMLINKS=$(find "$src" -type l | wc -l)
	dst=$X_MNT/copy
	HOOK_PRE="" HOOK_POST="" RC_OK_FN=x_rc_ok
	for REP in $(seq "$REPS"); do
		for t in "${tools[@]}"; do
			usable x "$t" || continue
			if ! x_fresh; then
				R_NOTE["x|$t"]="skipped: $X_WHY"
				log "x: $X_WHY"
				continue
			fi
			mkdir -p "$dst"
			rm_manifest "$m"
			timed x "$t" "$src" "$dst" "$m" || continue
			if [ "$REP" = 1 ] || [ "$t" = ferry-x ]; then
				check_fidelity x "$t" "$src" "$dst" --exfat
			fi
		done
	done
	RC_OK_FN=""
	rm_manifest "$m"
	cleanup13
	REPORT+=$(table x ferry-x "${tools[@]}")$'\n'
}

# ---- jauto: bench/jauto -------------------------------------------------------

# bench/jauto (-j auto against fixed -j) is called as
#   jauto [--quick] --ferry PATH --build DIR --workdir DIR --reps N
# prints Markdown on stdout (appended to the report) and exits 0, 1 (a ferry
# run failed or copied wrong) or 2 (setup). Its table's rows that end in
# "| **R** |" (auto ÷ best fixed -j) go into the targets table (≤ 1.10);
# a WORKDIR/targets.tsv of "row<TAB>measured<TAB>target<TAB>verdict" lines,
# when it writes one, replaces them.
scenario_jauto() {
	local dir=$WORK/jauto out=$WORK/logs/jauto.md rc args=()
	section "jauto) -j auto against fixed -j (bench/jauto)"
	if [ ! -x "$BENCH/jauto" ]; then
		REPORT+=$'\n'"Skipped: bench/jauto is not in this tree."$'\n'
		log "jauto: skipped: no bench/jauto"
		return
	fi
	[ "$QUICK" = 1 ] && args+=(--quick)
	args+=(--ferry "$FERRY" --build "$BUILD" --workdir "$dir" --reps "$REPS")
	mkdir -p "$dir"
	rm -f "$dir/targets.tsv"
	"$BENCH/jauto" "${args[@]}" </dev/null >"$out" 2>"$WORK/logs/jauto.err" &
	CHILD=$!
	wait "$CHILD"
	rc=$?
	CHILD=""
	REPORT+=$'\n'"$(cat "$out")"$'\n'
	case $rc in
	0) ;;
	1) ferry_failed "[jauto] bench/jauto reports a ferry failure (log: $WORK/logs/jauto.err)" ;;
	*)
		REPORT+=$'\n'"bench/jauto failed (exit $rc): $(tail -n 3 "$WORK/logs/jauto.err" | tr '\n' ' ')"$'\n'
		log "jauto: exit $rc"
		;;
	esac
}

# ---- the targets of issue 13 --------------------------------------------------

# t13_jauto: bench/jauto's rows "| CASE | auto | ... | -j B | **R** |".
t13_jauto() {
	local f=$WORK/jauto/targets.tsv md=$WORK/logs/jauto.md line c r
	if [ -s "$f" ]; then
		while IFS=$'\t' read -r -a line; do
			[ "${#line[@]}" -ge 4 ] && t13_row "jauto: ${line[0]}" "${line[1]//|/\\|}" "${line[2]//|/\\|}" "${line[3]//|/\\|}"
		done <"$f"
		return
	fi
	[ -s "$md" ] || return 0
	while IFS= read -r line; do
		[[ $line =~ ^\|\ ([^|]+)\ \|\ ([0-9.]+)\ \|.*\|\ (-j\ [0-9]+)\ \|\ \*\*([0-9.]+)\*\*\ \|$ ]] || continue
		c=${BASH_REMATCH[1]} r=${BASH_REMATCH[4]}
		t13_row "jauto: $c: -j auto ÷ the best fixed -j (${BASH_REMATCH[3]})" \
			"**$r** (${BASH_REMATCH[2]} s)" "≤ 1.10 ×" "$(verdict "$r" 1.10)"
	done <"$md"
}

T13=""

# med_ok ID TOOL: the median when every run of TOOL exited 0, else nothing.
med_ok() {
	[ -n "${R_TIMES[$1|$2]:-}" ] && [ "${R_RC[$1|$2]:-1}" = 0 ] || return 0
	# shellcheck disable=SC2086
	median ${R_TIMES[$1|$2]}
}

# verdict VALUE LIMIT: met when VALUE <= LIMIT.
verdict() {
	awk -v v="$1" -v l="$2" 'BEGIN { print (v + 0 <= l + 0) ? "met" : "**missed**" }'
}

# t13_row ROW MEASURED TARGET VERDICT (a | in ROW is escaped for Markdown)
t13_row() {
	T13+="| ${1//|/\\|} | $2 | $3 | $4 |"$'\n'
}

# t13_ratio ID TOOL PEER LIMIT ROW: ferry (TOOL) ÷ PEER against LIMIT.
t13_ratio() {
	local a b r
	a=$(med_ok "$1" "$2") b=$(med_ok "$1" "$3")
	if [ -z "$a" ] || [ -z "$b" ]; then
		t13_row "$5" "not measured (a run failed or was not made)" "≤ $4" "—"
		return
	fi
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	t13_row "$5" "**$r** ($a s vs $b s)" "≤ $4 ×" "$(verdict "$r" "$4")"
}

targets13() {
	local v s any=0 line
	for s in b3 b5 s n farm one x jauto; do wants "$s" && any=1; done
	[ "$any" = 1 ] || return 0
	T13=""
	wants b3 && t13_ratio b3 ferry rclone32 0.30 "b3: $B3_FILES files through slowfs, 1 ms: ferry ÷ rclone --transfers 32"
	if wants b5; then
		t13_ratio b5 ferry rclone32 0.30 "b5: same at 5 ms: ferry ÷ rclone --transfers 32"
		v=$(med_ok b5 ferry)
		if [ -n "$v" ]; then
			t13_row "b5: ferry's time at 5 ms (f9081c4: $B5_BASE_SECS s)" "**$v s**" "≤ $B5_LIMIT_SECS s" "$(verdict "$v" "$B5_LIMIT_SECS")"
		else
			t13_row "b5: ferry's time at 5 ms" "not measured" "≤ $B5_LIMIT_SECS s" "—"
		fi
		[ -n "$FERRY_BASE" ] && t13_ratio b5 ferry base 0.50 "b5: ferry ÷ ferry base (\`$("$FERRY_BASE" -V 2>/dev/null | head -n 1)\`, $FERRY_BASE)"
	fi
	wants s && t13_ratio s ferry tar 0.70 "s: $S_FILES files local, cold, durable: ferry ÷ tar | tar"
	wants n && t13_ratio n ferry-noop rsync-noop 0.35 "n: no-op re-run of s: ferry ÷ rsync -a"
	if wants farm; then
		t13_ratio farm ferry cp 0.80 "farm: $((FARM_FILES * FARM_SNAPS)) names: ferry ÷ cp -a"
		v=${R_RSS[farm|ferry]:-}
		if [ -n "$v" ]; then
			t13_row "farm: ferry's peak RSS" "**$v MiB**" "≤ 16 MiB" "$(verdict "$v" 16)"
		else
			t13_row "farm: ferry's peak RSS" "not measured" "≤ 16 MiB" "—"
		fi
	fi
	if wants one; then
		v=$(med_ok one ferry-one)
		if [ -n "$v" ]; then
			t13_row "one: a 1-file job, ferry's time" "**$v ms**" "≤ 20 ms" "$(verdict "$v" 20)"
		else
			t13_row "one: a 1-file job, ferry's time" "not measured" "≤ 20 ms" "—"
		fi
		v=${R_SYNCS[one|ferry-one]:-}
		if [[ $v =~ ^[0-9]+ ]]; then
			t13_row "one: ferry's sync calls" "**$v**" "≤ 3" "$(verdict "${v%% *}" 3)"
			t13_row "one: threads ferry starts (clone/clone3)" "${R_CLONES[one|ferry-one]:-—}" "on demand (no number)" "—"
		else
			t13_row "one: ferry's sync calls" "not measured${v:+ ($v)}" "≤ 3" "—"
		fi
	fi
	if wants x; then
		v=$(med_ok x ferry-x)
		local p pv
		for p in xargs-dirs cp-r rsync-r; do
			pv=$(med_ok x "$p")
			if [ -n "$v" ] && [ -n "$pv" ]; then
				t13_row "x: onto exFAT: ferry ÷ $(tool_label "$p")" "$(awk -v a="$v" -v b="$pv" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') ($v s vs $pv s)" "none (report)" "—"
			else
				t13_row "x: onto exFAT: ferry ÷ $(tool_label "$p")" "not measured" "none (report)" "—"
			fi
		done
	fi
	wants jauto && t13_jauto

	section "Targets of issue 13" \
		"Same-run ratios of medians; \"met\" when the measured value is at most the target.$([ "$QUICK" = 1 ] && echo " With --quick the trees are tiny and the verdicts mean nothing.")"
	REPORT+=$'\n'"| Row | Measured | Target | |"$'\n'"|---|---|---|---|"$'\n'"$T13"
}
