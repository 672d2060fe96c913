#!/bin/bash
# t40-xattrs-acls: extended attributes, POSIX ACLs and file capabilities
# arrive as cp -a and rsync -aHAX keep them.
#
# Proves (oracles: getfattr -d -m - of every entry, getfacl, getcap, stat,
# rsync -aHAXn -i --numeric-ids, and the same tree copied by cp -a):
#  - user.*, trusted.*, security.* xattrs (an empty value, one of 3000
#    bytes) on files, a directory and a symlink (trusted.*) are copied;
#  - a capability (cap_net_bind_service,cap_net_admin=ep) on a file owned
#    by another user survives the chown, with the setgid bit;
#  - access and default ACLs on files and directories, the issue's case
#    group::r-- mask::rw- not widened to group::rw-;
#  - a file copied again into a DST directory with a default ACL does not
#    keep the access ACL it inherits there when SRC's has none;
#  - an xattr removed in SRC is removed in DST by the next run;
#  - --no-xattrs drops the xattrs and keeps the ACLs, --no-acls the reverse;
#  - an unprivileged run in supplementary groups gives files, a FIFO, a
#    symlink and a directory their group as cp -a does (stat), one it is
#    not in is left as cp -a leaves it; a chgrp in SRC is then applied in
#    place (inode kept, files_copied 0) and --verify passes;
#  - an unprivileged run keeps user.* xattrs and ACLs of files it owns and,
#    as rsync -X, does not try the namespaces only root may set (a file
#    with a capability still arrives, exit 0).
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) == 0 ]] || skip_all "needs root (trusted.* and security.* xattrs, setcap)"
need_cmd getfattr setfattr getfacl setfacl setcap getcap rsync
setfattr -n user.probe -v 1 "$T/log" 2>/dev/null ||
	skip_all "$TMPDIR holds no user xattrs"
setfacl -m u:$NOBODY_UID:r "$T/log" 2>/dev/null || skip_all "$TMPDIR holds no ACLs"
setfacl -b "$T/log"
setfattr -x user.probe "$T/log"

umask 022
make_tree() {
	local s=$1 big
	mkdir -p "$s/bin" "$s/shared" "$s/plain-dir"
	printf 'data\n' >"$s/f1"
	setfattr -n user.color -v blue "$s/f1"
	setfattr -n user.empty "$s/f1"
	setfattr -n trusted.t -v 0x0102ff00 "$s/f1"
	setfattr -n security.ferry-test -v sec "$s/f1"
	big=$(head -c 1500 /dev/zero | tr '\0' x)
	setfattr -n user.big -v "$big$big" "$s/f1"
	printf '#!/bin/sh\n' >"$s/bin/helper"
	chown "$NOBODY_UID:$NOBODY_GID" "$s/bin/helper"
	chmod 2755 "$s/bin/helper"
	setcap cap_net_bind_service,cap_net_admin=ep "$s/bin/helper"
	printf 'acl\n' >"$s/acl-file"
	setfacl -m u:$NOBODY_UID:rw-,g::r--,m::rw- "$s/acl-file"
	printf 'before\n' >"$s/shared/old" # made before the default ACL
	setfacl -m u:$NOBODY_UID:r-x "$s/shared"
	setfacl -d -m u:$NOBODY_UID:rwx,g::r-x "$s/shared"
	setfattr -n user.dir -v yes "$s/shared"
	printf 'after\n' >"$s/shared/new" # inherits the default ACL
	ln -s f1 "$s/link"
	setfattr -h -n trusted.link -v lnk "$s/link"
	printf 'none\n' >"$s/plain-dir/none"
}

# dump_xattrs DIR: every entry's xattrs, all namespaces (ACLs too), in hex,
# paths relative to DIR, sorted.
dump_xattrs() {
	(cd "$1" && find . -mindepth 1 -print0 | sort -z |
		xargs -0 getfattr -h -d -m - -e hex -- 2>/dev/null)
}
# dump_user_acls DIR: the same for user.* xattrs and ACLs alone.
dump_user_acls() {
	(cd "$1" && find . -mindepth 1 -print0 | sort -z |
		xargs -0 getfattr -h -d -m '^(user\.|system\.posix_acl_)' -e hex -- 2>/dev/null)
}
dump_acls() {
	(cd "$1" && find . -mindepth 1 ! -type l -print0 | sort -z |
		xargs -0 getfacl -n -P -- 2>/dev/null)
}
dump_caps() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 getcap --); }
dump_stat() { (cd "$1" && find . -mindepth 1 -print0 | sort -z | xargs -0 stat -c '%n %A %u %g'); }

# same_dump WHAT FN A B: the dumps of A and B agree.
same_dump() {
	"$2" "$3" >"$LOG/$1.a"
	"$2" "$4" >"$LOG/$1.b"
	if diff "$LOG/$1.a" "$LOG/$1.b" >"$LOG/$1.diff"; then
		ok "$1 of $4 equal $3's ($(grep -c . "$LOG/$1.a") lines)"
	else
		fail "$1 of $4 equal $3's (< $3, > $4)"
		show "$LOG/$1.diff" 30
	fi
}

rsync_equal() {
	rsync -aHAXn -i --numeric-ids "$1/" "$2/" >"$LOG/rsync" 2>&1
	if [[ $? == 0 && ! -s $LOG/rsync ]]; then
		ok "rsync -aHAXn -i finds $2 equal to $1"
	else
		fail "rsync -aHAXn -i finds $2 equal to $1"
		show "$LOG/rsync"
	fi
}

check_full_copy() {
	make_tree src
	expect_code 0 "$FERRY" -q src dst
	same_dump xattrs dump_xattrs src dst
	same_dump acls dump_acls src dst
	same_dump caps dump_caps src dst
	same_dump stat dump_stat src dst
	rsync_equal src dst
	check "the capability arrived" grep -q 'cap_net_admin,cap_net_bind_service=ep\|cap_net_bind_service,cap_net_admin=ep' <(getcap dst/bin/helper)
	check "group::r-- with mask::rw- is not widened" \
		grep -qx 'group::r--' <(getfacl -n dst/acl-file 2>/dev/null)
	check "the default ACL arrived" grep -q '^default:user:65534:rwx' <(getfacl -n dst/shared 2>/dev/null)
	check "the symlink's trusted xattr arrived" grep -q '^trusted.link=' <(getfattr -h -d -m - dst/link 2>/dev/null)
	# the second oracle: cp -a's copy holds the same
	cp -a src cp-dst
	same_dump xattrs-vs-cp dump_xattrs cp-dst dst
	same_dump acls-vs-cp dump_acls cp-dst dst
	expect_code 0 "$FERRY" -v src dst
	check "a second run copies nothing" test ! -s "$LOG/out"
}

# A file copied again lands as a temp file in a DST directory that has a
# default ACL now: it inherits an access ACL SRC's file does not have.
check_inherited_acl_removed() {
	printf 'changed, longer\n' >src/shared/old
	setfattr -x user.color src/f1
	expect_code 0 "$FERRY" -q src dst
	check "an inherited access ACL is removed (SRC's file has none)" \
		test -z "$(getfattr -m system.posix_acl_access -d dst/shared/old 2>/dev/null)"
	check "an xattr removed in SRC is removed in DST" \
		test -z "$(getfattr -n user.color dst/f1 2>/dev/null)"
	same_dump xattrs-again dump_xattrs src dst
	rsync_equal src dst
}

# only_acls DIR / no_acls DIR: the dump keeps only the ACL lines, or drops them.
only_acls() { dump_xattrs "$1" | grep -E '^(# file|system\.posix_acl)' | grep -B1 '^system' | grep -v '^--'; }
without_acls() { dump_xattrs "$1" | grep -v '^system\.posix_acl' | awk '/^# file/ {f=$0; next} /=/ {if (f) print f; f=""; print}'; }

check_no_xattrs_no_acls() {
	expect_code 0 "$FERRY" -q --no-xattrs src dst-nox
	check "--no-xattrs: no user/trusted/security xattrs" \
		test -z "$(dump_xattrs dst-nox | grep -E '^(user|trusted|security)\.')"
	same_dump acls-nox only_acls src dst-nox
	check "--no-xattrs: no capability" test -z "$(getcap dst-nox/bin/helper)"
	expect_code 0 "$FERRY" -q --no-acls src dst-noacl
	check "--no-acls: no ACL" test -z "$(dump_xattrs dst-noacl | grep '^system\.posix_acl')"
	same_dump xattrs-noacl without_acls src dst-noacl
}

check_unprivileged() {
	if ! can_run_unprivileged; then
		say "SKIP unprivileged run: $WHY_NOT"
		return
	fi
	local n=$T/nobody
	mkdir -p "$n/src/d"
	printf 'mine\n' >"$n/src/f"
	setfattr -n user.mine -v 1 "$n/src/f"
	setfacl -m u:0:r--,g::r--,m::rw- "$n/src/f"
	setfacl -d -m u:0:rwx "$n/src/d"
	setfattr -n user.d -v 2 "$n/src/d"
	printf 'in d\n' >"$n/src/d/g"
	printf 'cap\n' >"$n/src/cap"
	chown -R "$NOBODY_UID:$NOBODY_GID" "$n/src"
	setcap cap_net_bind_service=ep "$n/src/cap" # only root may set it
	run as_nobody "$FERRY" -q "$n/src" "$n/dst"
	check "unprivileged run exits 0 (got $RC)" test "$RC" = 0
	show "$LOG/err"
	same_dump xattrs-nobody dump_user_acls "$n/src" "$n/dst"
	check "unprivileged: the capability is not attempted (as rsync -X)" \
		test -z "$(getcap "$n/dst/cap")"
	same_dump acls-nobody dump_acls "$n/src" "$n/dst"
}

# gdump DIR: "path kind uid gid" of every entry below DIR.
gdump() {
	(cd "$1" && find . -mindepth 1 -exec stat -c '%n %F %u %g' {} + | sort)
}

# Not root, cp -a and rsync -a give a file its group when the user is in
# it (chown -1:GID); so does ferry, to files, a FIFO, a symlink and a
# directory, and a chgrp in SRC is applied by the next run, in place.
check_unprivileged_group() {
	if ! can_run_unprivileged || ! command -v setpriv >/dev/null 2>&1; then
		say "SKIP unprivileged group: ${WHY_NOT:-needs setpriv (supplementary groups)}"
		return
	fi
	local n=$T/nobody/grp g=4242 g2=4244
	local as=(env XDG_STATE_HOME="$T/nobody/state" HOME="$T/nobody/home"
		setpriv --reuid="$NOBODY_UID" --regid="$NOBODY_GID" --groups="$g,$g2" --)
	mkdir -p "$n/src/d"
	printf 'f\n' >"$n/src/f"
	printf 'o\n' >"$n/src/other"
	printf 'n\n' >"$n/src/d/in"
	mkfifo "$n/src/p"
	ln -s f "$n/src/l"
	chown -R -h "$NOBODY_UID:$g" "$n/src"
	chown "$NOBODY_UID:4343" "$n/src/other" # a group the user is not in
	chown "$NOBODY_UID:$NOBODY_GID" "$n"
	run "${as[@]}" "$FERRY" -q "$n/src" "$n/dst"
	check "unprivileged with a supplementary group: exit 0 (got $RC)" test "$RC" = 0
	show "$LOG/err"
	run "${as[@]}" cp -a "$n/src" "$n/cpa"
	gdump "$n/cpa" >"$LOG/g.cpa"
	gdump "$n/dst" >"$LOG/g.dst"
	if cmp -s "$LOG/g.cpa" "$LOG/g.dst"; then
		ok "unprivileged: each entry's group is the one cp -a gives it (stat)"
	else
		fail "unprivileged: each entry's group is the one cp -a gives it (< cp -a, > ferry)"
		diff "$LOG/g.cpa" "$LOG/g.dst" | show -
	fi
	check "unprivileged: the group the user is in is DST's (file, FIFO, symlink, directory)" \
		test "$(stat -c %g "$n/dst/f" "$n/dst/p" "$n/dst/l" "$n/dst/d" | sort -u)" == "$g"
	local ino
	ino=$(stat -c %i "$n/dst/f")
	chgrp "$g2" "$n/src/f"
	chgrp -h "$g2" "$n/src/l"
	run "${as[@]}" "$FERRY" --json "$n/src" "$n/dst"
	check "unprivileged: the run after a chgrp exits 0 (got $RC)" test "$RC" = 0
	tail -n1 "$LOG/out" >"$LOG/g.json"
	expect_json "$LOG/g.json" files_copied 0
	check "unprivileged: a chgrp in SRC is applied (file and symlink)" \
		test "$(stat -c %g "$n/dst/f" "$n/dst/l" | sort -u)" == "$g2"
	check "unprivileged: in place (the DST inode kept)" test "$(stat -c %i "$n/dst/f")" == "$ino"
	run "${as[@]}" "$FERRY" --verify "$n/src" "$n/dst"
	check "unprivileged: --verify then passes (got $RC)" test "$RC" = 0
	show "$LOG/out"
}

check_full_copy
check_inherited_acl_removed
check_no_xattrs_no_acls
check_unprivileged
check_unprivileged_group
finish
