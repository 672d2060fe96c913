#!/bin/bash
# t14-no-attrs: --no-perms, --no-times and --no-owner leave those attributes
# to the destination, as cp without -p would, and copy everything else.
#
# Proves:
#  - --no-perms: files get 0666 and directories 0777, less the umask, whatever
#    the source's modes (0600, 0755, 0700 dirs); content and times are kept;
#  - --no-times: files and directories get fresh times, not the source's;
#  - --no-owner (as root): entries belong to the user running ferry;
#  - a re-run with the same option copies nothing: the attributes it did not
#    copy do not count as changes.
. "$(dirname "$0")/lib.sh" || exit 1

umask 022
mkdir -p src/private-dir src/open-dir
printf 'secret\n' >src/private-dir/f && chmod 0600 src/private-dir/f
printf '#!/bin/sh\n' >src/open-dir/run && chmod 0755 src/open-dir/run
printf 'plain\n' >src/plain
chmod 0700 src/private-dir
touch -d @1000000000.5 src/private-dir/f src/open-dir/run src/plain \
	src/private-dir src/open-dir
if [[ $(id -u) == 0 ]]; then
	chown -R "$NOBODY_UID:$NOBODY_GID" src/private-dir src/plain
fi

# modes DIR: "mode path" for everything below DIR.
modes() { (cd "$1" && find . -mindepth 1 -printf '%m %P\n' | sort -k2); }
mtimes() { (cd "$1" && find . -mindepth 1 -printf '%T@ %P\n' | sort -k2); }
owners() { (cd "$1" && find . -mindepth 1 -printf '%U %P\n' | sort -k2); }

rerun_copies_nothing() {
	expect_code 0 "$FERRY" -v "$@" src "$DST"
	check "re-run with $1 copies nothing" test ! -s "$LOG/out"
}

check_no_perms() {
	DST=dst-noperms
	expect_code 0 "$FERRY" -q --no-perms src "$DST"
	printf '%s\n' '755 open-dir' '644 open-dir/run' '644 plain' \
		'755 private-dir' '644 private-dir/f' >"$LOG/want"
	modes "$DST" >"$LOG/got"
	same_set "--no-perms: files 0644, dirs 0755 (umask 022)" "$LOG/want" "$LOG/got"
	check "--no-perms: content copied" diff -r src "$DST"
	mtimes src >"$LOG/want"
	mtimes "$DST" >"$LOG/got"
	same_set "--no-perms: times still copied" "$LOG/want" "$LOG/got"
	rerun_copies_nothing --no-perms
}

check_no_times() {
	local old
	DST=dst-notimes
	expect_code 0 "$FERRY" -q --no-times src "$DST"
	old=$(cd "$DST" && find . -mindepth 1 -not -newermt '@1000000001' -printf '%P\n')
	check "--no-times: no entry has the source's old time ($old)" test -z "$old"
	modes src >"$LOG/want"
	modes "$DST" >"$LOG/got"
	same_set "--no-times: modes still copied" "$LOG/want" "$LOG/got"
	rerun_copies_nothing --no-times
}

check_no_owner() {
	if [[ $(id -u) != 0 ]]; then
		say "SKIP --no-owner: only root copies owners"
		return
	fi
	DST=dst-noowner
	expect_code 0 "$FERRY" -q --no-owner src "$DST"
	owners "$DST" | grep -v '^0 ' >"$LOG/foreign"
	check "--no-owner: everything belongs to root" test ! -s "$LOG/foreign"
	show "$LOG/foreign"
	check "--no-owner: (the source has files owned by $NOBODY_UID)" \
		grep -q "^$NOBODY_UID " <(owners src)
	rerun_copies_nothing --no-owner
}

check_no_perms
check_no_times
check_no_owner
finish
