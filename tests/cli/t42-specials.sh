#!/bin/bash
# t42-specials: FIFOs, sockets and devices are copied as cp -a and
# rsync -a -D copy them (issue 10).
#
# Oracles: `stat -c '%F %t:%T %a %u:%g %Y'` dumps of SRC and DST (kind,
# device number, mode, owner, mtime), `rsync -aHAXn -i --numeric-ids`
# (an empty itemized list: equal) and the dump of what cp -a made. Proves:
#  - as root: a FIFO, a socket (a socket node, as cp -a makes), a
#    character and a block device arrive with their kind, rdev, mode,
#    owner and mtime, hard-linked ones as links; a re-run copies nothing;
#    --verify passes;
#  - a special whose device number or kind changed in SRC is made again;
#  - a run leaves a DST device with another rdev alone (rule 9: not
#    what ferry made); --verify finds it ("differ") and claims it, so the
#    next run makes it again (as it re-copies a file that differs);
#  - a FIFO in DST that ferry did not make is not replaced;
#  - a FIFO copied with --no-perms --no-times --no-owner gets its mode,
#    owner and mtime from a plain run (rsync -aHAXn lists nothing; --verify
#    passes); a chown of it in SRC is applied in place (its DST inode
#    kept, files_copied 0); with --durability=file its DST directory is
#    fsynced after that, as a symlink's is after a chown -h (strace -y);
#  - --delete removes a special ferry made whose SRC entry is gone;
#  - --no-specials and --no-devices skip them (counted, with the reason);
#    a later run without them copies them;
#  - root without CAP_MKNOD: devices skipped with the reason, copied by a
#    later run that has it;
#  - unprivileged: FIFOs and sockets are copied, devices skipped with the
#    reason "devices need root", said once; a later root run copies them.
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) == 0 ]] || skip_all "needs root (device nodes; the unprivileged part runs as nobody)"
need_cmd rsync python3 stat

# dump DIR: "path kind major:minor mode owner mtime" of every entry below DIR.
dump() {
	(cd "$1" && find . -mindepth 1 -exec stat -c '%n %F %t:%T %a %u:%g %Y' {} + | sort)
}

# same_dump A B WHAT: the dumps of A and B agree.
same_dump() {
	dump "$1" >"$LOG/dump.a"
	dump "$2" >"$LOG/dump.b"
	if cmp -s "$LOG/dump.a" "$LOG/dump.b"; then
		ok "$3"
	else
		fail "$3 (< $1, > $2)"
		diff "$LOG/dump.a" "$LOG/dump.b" | show -
	fi
}

# rsync_equal A B WHAT: rsync -aHAXn finds nothing to do from A to B.
rsync_equal() {
	rsync -aHAXn -i --numeric-ids "$1/" "$2/" >"$LOG/rsync" 2>&1
	if [[ $? == 0 && ! -s $LOG/rsync ]]; then
		ok "$3"
	else
		fail "$3 (rsync -aHAXn -i lists:)"
		show "$LOG/rsync"
	fi
}

mksock() {
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$1" ||
		die "cannot make a socket at $1"
}

# summary: the --json line of the last run's stdout.
summary() {
	tail -n1 "$LOG/out" >"$LOG/summary"
}

make_src() {
	mkdir -p src/sub
	printf 'data\n' >src/reg
	mkfifo src/fifo
	chmod 640 src/fifo
	chown 12:34 src/fifo
	mksock src/sub/sock
	chmod 755 src/sub/sock
	mknod src/null c 1 3
	chmod 620 src/null
	chown 5:6 src/null
	mknod src/loop b 7 0
	chmod 600 src/loop
	# hard links of special files, which cp -a and rsync -H keep
	mkfifo src/sub/linked-fifo
	ln src/sub/linked-fifo src/linked-fifo2
	mknod src/linked-dev c 1 7
	ln src/linked-dev src/sub/linked-dev2
	touch -h -d '2001-02-03 04:05:06' src/fifo src/null src/loop src/sub/sock
	touch -d '2002-01-01' src/sub
}

root_part() {
	make_src
	expect_code 0 "$FERRY" --json src dst || return
	summary
	expect_json "$LOG/summary" files_copied 7
	expect_json "$LOG/summary" files_linked 2
	expect_json "$LOG/summary" files_skipped 0
	same_dump src dst "as root: FIFO, socket, char and block device arrive (kind, rdev, mode, owner, mtime)"
	rsync_equal src dst "as root: rsync -aHAXn finds nothing to do"
	cp -a src cpa
	same_dump cpa dst "as root: DST is what cp -a makes"
	check "a hard-linked FIFO is one inode in DST" test dst/sub/linked-fifo -ef dst/linked-fifo2
	check "a hard-linked device is one inode in DST" test dst/linked-dev -ef dst/sub/linked-dev2

	expect_code 0 "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 0
	expect_code 0 "$FERRY" --verify src dst

	# another device number, another kind: made again
	rm src/null src/fifo
	mknod src/null c 1 5
	mksock src/fifo
	touch -h -d '2003-01-01' src/null src/fifo
	expect_code 0 "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 2
	same_dump src dst "a changed rdev and a changed kind are made again"
	rsync_equal src dst "after the change: rsync -aHAXn finds nothing to do"

	# a DST device with another rdev where SRC's changed: the run leaves
	# it (rule 9: not what ferry made)
	rm dst/loop
	mknod dst/loop b 7 1
	touch -h -d '2004-01-01' src/loop
	expect_code 23 "$FERRY" src dst
	check "a device ferry did not make is not replaced (rule 9)" \
		test "$(stat -c '%t:%T' dst/loop)" == "7:1"

	# a user's FIFO where SRC has a new one: not replaced
	mkfifo src/newfifo
	mkfifo dst/newfifo
	touch -d '1999-01-01' dst/newfifo
	expect_code 23 "$FERRY" src dst
	check "a FIFO in DST that ferry did not make is left alone" \
		test "$(stat -c '%Y' dst/newfifo)" == "$(date -d 1999-01-01 +%s)"
	check "and the run says why" grep -q "not replaced" "$LOG/err"
	rm dst/newfifo dst/loop
	expect_code 0 "$FERRY" src dst
	same_dump src dst "once the user's entries are gone, the run makes them"

	# a DST device with another rdev: --verify says so and claims what
	# DST holds (its kind and rdev, as the copy records them), so that
	# the next run makes it again, as it re-copies a file that differs
	rm dst/loop
	mknod dst/loop b 7 1
	touch -h -r src/loop dst/loop
	expect_code 5 "$FERRY" --verify src dst
	check "--verify names the device with another rdev" grep -q "loop" "$LOG/out" "$LOG/err"
	expect_code 0 "$FERRY" src dst
	check "the run after --verify makes the device again" \
		test "$(stat -c '%t:%T' dst/loop)" == "7:0"
	same_dump src dst "after --verify and a run, DST is SRC again"

	# --delete: a special ferry made goes, one it did not stays
	check "the socket ferry made is in DST" test -S dst/sub/sock
	rm src/sub/sock
	mkfifo dst/users-fifo
	expect_code 0 "$FERRY" --json --delete src dst
	check "--delete removes a socket ferry made" test ! -e dst/sub/sock
	check "--delete leaves a FIFO ferry did not make" test -p dst/users-fifo
	rm dst/users-fifo

	# --no-specials, --no-devices: skipped, counted, with the reason
	expect_code 0 "$FERRY" --json --no-specials --no-devices src dst2
	summary
	expect_json "$LOG/summary" files_skipped 8
	check "--no-specials: no FIFO or socket in DST" test ! -e dst2/fifo -a ! -e dst2/newfifo
	check "--no-devices: no device in DST" test ! -e dst2/null -a ! -e dst2/loop
	check "--no-specials says why" grep -q "'newfifo': FIFO or socket skipped (--no-specials)" "$LOG/err"
	check "--no-devices says why" grep -q "'loop': device skipped (--no-devices)" "$LOG/err"
	expect_code 0 "$FERRY" --json --no-devices src dst2
	summary
	expect_json "$LOG/summary" files_copied 3
	expect_json "$LOG/summary" files_linked 1
	expect_json "$LOG/summary" files_skipped 4
	expect_code 0 "$FERRY" --json src dst2
	summary
	expect_json "$LOG/summary" files_copied 3
	expect_json "$LOG/summary" files_linked 1
	same_dump src dst2 "a later run without the options copies what they skipped"
	rsync_equal src dst2 "and rsync -aHAXn finds nothing to do (hard links too)"
}

# A special's metadata is its own layer as a file's is (issue 10 review
# items 2, 3, 6): options that left its mode, owner and times out are
# reconciled by a plain run; a chown of it in SRC is applied in place (the
# same DST inode, nothing copied); with --durability=file that change (no
# descriptor to fsync) is made durable by its DST directory's fsync.
meta_part() {
	mkdir -p meta/src/s
	ln -s ../p meta/src/s/l
	mkfifo meta/src/p
	chmod 640 meta/src/p
	chown 21:43 meta/src/p
	touch -h -d '2003-04-05 06:07:08' meta/src/p
	cd meta || die "cd"
	expect_code 0 "$FERRY" -q --no-perms --no-times --no-owner src dst
	expect_code 0 "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 0
	expect_json "$LOG/summary" meta_applied 2 # the FIFO, the symlink
	rsync_equal src dst "a plain run after --no-perms --no-times --no-owner gives the FIFO its mode, owner and mtime (rsync -aHAXn)"
	expect_code 0 "$FERRY" --verify src dst
	check "--verify then finds nothing" test ! -s "$LOG/out"
	local ino
	ino=$(stat -c %i dst/p)
	chown 22:44 src/p
	expect_code 0 "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 0
	expect_json "$LOG/summary" meta_applied 1
	check "a chown of a FIFO in SRC is applied in place (DST inode kept)" \
		test "$(stat -c %i dst/p)" == "$ino"
	rsync_equal src dst "the FIFO's new owner is in DST (rsync -aHAXn)"
	if have_strace; then
		chown 23:45 src/p
		chown -h 24:46 src/s/l
		expect_code 0 env "$(no_leak_check_env)" strace -f -qq -y -o "$LOG/meta.trace" -e trace=fsync \
			"$FERRY" -q --durability=file src dst
		check "--durability=file: a FIFO's owner applied in place is made durable by an fsync of its DST directory (strace)" \
			grep -q "fsync([0-9]*<$T/meta/dst>)" "$LOG/meta.trace"
		check "--durability=file: so is a symlink's (strace)" \
			grep -q "fsync([0-9]*<$T/meta/dst/s>)" "$LOG/meta.trace"
		show "$LOG/meta.trace"
		rsync_equal src dst "the FIFO's and the symlink's owners after --durability=file (rsync -aHAXn)"
	else
		say "strace missing: the directory fsync of --durability=file is not checked"
	fi
	cd "$T" || die "cd"
}

nobody_part() {
	if ! can_run_unprivileged; then
		say "unprivileged part skipped: $WHY_NOT"
		return
	fi
	mkdir -p "$T/nobody/src"
	mkfifo "$T/nobody/src/fifo"
	mksock "$T/nobody/src/sock"
	mknod "$T/nobody/src/null" c 1 3
	mknod "$T/nobody/src/zero" c 1 5
	printf 'x\n' >"$T/nobody/src/reg"
	touch -h -d '2001-02-03' "$T/nobody/src/"*
	chown -R "$NOBODY_UID:$NOBODY_GID" "$T/nobody/src"
	cd "$T/nobody" || die "cd"
	expect_code 0 as_nobody "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 3
	expect_json "$LOG/summary" files_skipped 2
	check "unprivileged: the FIFO arrives" test -p dst/fifo
	check "unprivileged: the socket arrives" test -S dst/sock
	check "unprivileged: devices are not made" test ! -e dst/null -a ! -e dst/zero
	check "unprivileged: each skipped device says why" \
		test "$(grep -c "device skipped: devices need root" "$LOG/err")" == 2
	check "unprivileged: 'devices need root' is said once" \
		test "$(grep -c "warning: devices need root" "$LOG/err")" == 1
	(cd src && find . -mindepth 1 ! -type c -exec stat -c '%n %F %a %u:%g %Y' {} + | sort) >"$LOG/n.a"
	(cd dst && find . -mindepth 1 -exec stat -c '%n %F %a %u:%g %Y' {} + | sort) >"$LOG/n.b"
	if cmp -s "$LOG/n.a" "$LOG/n.b"; then
		ok "unprivileged: FIFO, socket and file agree with SRC (stat dump)"
	else
		fail "unprivileged: FIFO, socket and file agree with SRC (< SRC, > DST)"
		diff "$LOG/n.a" "$LOG/n.b" | show -
	fi
	expect_code 0 as_nobody "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 0
	# the same job as root: the devices it skipped are copied now
	expect_code 0 env XDG_STATE_HOME="$T/nobody/state" "$FERRY" --json src dst
	summary
	expect_json "$LOG/summary" files_copied 2
	same_dump src dst "a later root run copies the devices the unprivileged one skipped"
	cd "$T" || die "cd"
}

# root without CAP_MKNOD (a container's --cap-drop): devices skipped
# with the reason, FIFOs copied; a later run with it copies the devices.
nocap_part() {
	if ! setpriv --bounding-set=-mknod true 2>/dev/null; then
		say "the part without CAP_MKNOD skipped: setpriv --bounding-set is missing"
		return
	fi
	mkdir -p nocap/src
	mkfifo nocap/src/fifo
	mknod nocap/src/null c 1 3
	expect_code 0 setpriv --bounding-set=-mknod "$FERRY" --json nocap/src nocap/dst
	summary
	expect_json "$LOG/summary" files_skipped 1
	check "without CAP_MKNOD: the FIFO arrives" test -p nocap/dst/fifo
	check "without CAP_MKNOD: the device is not made" test ! -e nocap/dst/null
	check "without CAP_MKNOD: the run says why" grep -q "'null': device skipped: devices need root with CAP_MKNOD" "$LOG/err"
	expect_code 0 "$FERRY" --json nocap/src nocap/dst
	summary
	expect_json "$LOG/summary" files_copied 1
	same_dump nocap/src nocap/dst "with CAP_MKNOD again, the device is copied"
}

root_part
meta_part
nocap_part
nobody_part
finish
