#!/bin/bash
# t18-configure: configuring without SQLite, xxHash or libpq stops with an
# error that names the Debian package to install.
#
# Proves, with pkg-config pointed at a directory of our own:
#  - no sqlite3.pc: cmake fails and says "apt-get install libsqlite3-dev";
#  - sqlite3.pc only: cmake fails and says "apt-get install libxxhash-dev";
#  - both: cmake fails and says "apt-get install libpq-dev";
#  - all three (and the .pc files libpq's requires): cmake succeeds (so
#    the failures come from the missing package, not from the set-up).
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd cmake pkg-config
[[ -f ${FERRY_SRCDIR-}/CMakeLists.txt ]] ||
	skip_all "needs FERRY_SRCDIR, the source tree (set by ctest)"

pc_of() { pkg-config --variable pcfiledir "$1" 2>/dev/null; }
sqlite_pc=$(pc_of sqlite3)/sqlite3.pc
xxhash_pc=$(pc_of libxxhash)/libxxhash.pc
libpq_pc=$(pc_of libpq)/libpq.pc
[[ -f $sqlite_pc && -f $xxhash_pc && -f $libpq_pc ]] ||
	die "sqlite3.pc, libxxhash.pc or libpq.pc not found, yet ferry was built"
# what libpq.pc requires (libssl, libcrypto): pkg-config looks for them too
libpq_reqs=()
for m in $(pkg-config --print-requires-private libpq | awk '{print $1}'); do
	libpq_reqs+=("$(pc_of "$m")/$m.pc")
done

# configure NAME PCFILE...: cmake with only the given .pc files visible.
configure() {
	local name=$1
	shift
	mkdir "pc-$name"
	(($#)) && cp -- "$@" "pc-$name/"
	run env PKG_CONFIG_LIBDIR="$T/pc-$name" PKG_CONFIG_PATH= \
		cmake -S "$FERRY_SRCDIR" -B "build-$name" -DBUILD_TESTING=OFF
	cat "$LOG/out" "$LOG/err" >"$LOG/all"
}

configure none
check "no sqlite3.pc: cmake fails (rc $RC)" test "$RC" != 0
check "no sqlite3.pc: the error names libsqlite3-dev" \
	grep -q 'apt-get install libsqlite3-dev' "$LOG/all"
show "$LOG/err" 5

configure sqlite "$sqlite_pc"
check "sqlite3.pc only: cmake fails (rc $RC)" test "$RC" != 0
check "sqlite3.pc only: the error names libxxhash-dev" \
	grep -q 'apt-get install libxxhash-dev' "$LOG/all"
check "sqlite3.pc only: libsqlite3-dev is not named" \
	eval '! grep -q libsqlite3-dev "$LOG/all"'

configure both "$sqlite_pc" "$xxhash_pc"
check "sqlite3.pc and libxxhash.pc: cmake fails (rc $RC)" test "$RC" != 0
check "sqlite3.pc and libxxhash.pc: the error names libpq-dev" \
	grep -q 'apt-get install libpq-dev' "$LOG/all"
check "sqlite3.pc and libxxhash.pc: neither of theirs is named" \
	eval '! grep -qE "libsqlite3-dev|libxxhash-dev" "$LOG/all"'

configure all "$sqlite_pc" "$xxhash_pc" "$libpq_pc" "${libpq_reqs[@]}"
check "all three .pc files: cmake succeeds (rc $RC)" test "$RC" = 0
show "$LOG/err" 5

finish
