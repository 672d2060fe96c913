#!/bin/bash
# t10-help-man: --help, -V and man/ferry.1 agree with each other and with
# the code (in the spirit of git's t0450-txt-doc-vs-help.sh).
#
# Proves:
#  - -h/--help print usage on stdout and exit 0; -V/--version print
#    "ferry VERSION" with the project's version and exit 0;
#  - every long and short option in --help is documented in man/ferry.1,
#    and every option the man page documents is in --help; the defaults of
#    --jobs and --retries agree, and so do their ranges;
#  - the man page and --help's "exit codes:" text list every exit code of
#    enum ferry_code (include/ferry.h), and --help lists no other; the man
#    page documents the manifest location, XDG_STATE_HOME and `ferry status`;
#  - the man page renders without warnings.
. "$(dirname "$0")/lib.sh" || exit 1

MAN=$FERRY_SRCDIR/man/ferry.1
[[ -f $MAN ]] || die "no man page at $MAN"

check_help_and_version() {
	local version
	version=$(sed -n 's/^project(ferry VERSION \([0-9.]*\).*/\1/p' "$FERRY_SRCDIR/CMakeLists.txt")
	for opt in -h --help; do
		expect_code 0 "$FERRY" "$opt"
		check "$opt prints usage on stdout" grep -qi 'usage' "$LOG/out"
		check "$opt prints nothing on stderr" test ! -s "$LOG/err"
	done
	cp "$LOG/out" "$LOG/help"
	for opt in -V --version; do
		expect_code 0 "$FERRY" "$opt"
		check "$opt prints 'ferry $version' first" test "$(head -n 1 "$LOG/out")" = "ferry $version"
	done
}

# Long options: "--name" in the help text; ".Fl -name" in the mdoc source.
help_long() { grep -oE -- '--[a-z][a-z0-9-]+' "$LOG/help" | sort -u; }
man_long() { grep -oE 'Fl \\?-[a-z][a-z0-9-]+' "$MAN" | sed -E 's/^Fl \\?-/--/' | sort -u; }
# Short options: "-x," or "-x " at the start of a help line; ".Fl x" in mdoc.
help_short() { grep -oE '^[[:space:]]*-[a-zA-Z]\b' "$LOG/help" | tr -d ' \t' | sort -u; }
man_short() { grep -oE 'Fl [a-zA-Z]\b' "$MAN" | sed 's/^Fl /-/' | sort -u; }

check_options_documented() {
	help_long >"$LOG/help.long"
	man_long >"$LOG/man.long"
	same_set "long options: --help and man/ferry.1 agree" "$LOG/help.long" "$LOG/man.long"
	help_short >"$LOG/help.short"
	man_short >"$LOG/man.short"
	same_set "short options: --help and man/ferry.1 agree" "$LOG/help.short" "$LOG/man.short"
}

# check_defaults_documented: the defaults --help states for -j and
# --retries are the ones the man page states.
check_defaults_documented() {
	local jobs retries
	jobs=$(sed -n 's/.*--jobs.*(default \([0-9a-z]*\)[):].*/\1/p' "$LOG/help")
	retries=$(sed -n 's/.*--retries.*(default \([0-9]*\)).*/\1/p' "$LOG/help")
	check "--help states the default of --jobs ($jobs)" test -n "$jobs"
	check "man page: --jobs default is $jobs" \
		grep -q "^The default is $jobs\.\$" <(sed -n '/Fl -jobs/,/^\.It/p' "$MAN")
	check "man page: --retries default is $retries" \
		grep -q "(default $retries)" <(sed -n '/Fl -retries/,/^\.It/p' "$MAN")
	# the ranges: "1-1024" in --help, "from 1 to 1024" in the man page
	local opt lo hi
	for opt in jobs retries; do
		read -r lo hi < <(sed -n "s/.*--$opt.* \([0-9]*\)-\([0-9]*\) (default.*/\1 \2/p" "$LOG/help")
		check "--help states the range of --$opt ($lo-$hi)" test -n "$hi"
		check "man page: --$opt is from $lo to $hi" \
			grep -q "from $lo to $hi" <(sed -n "/Fl -$opt/,/^\.It/p" "$MAN" | tr '\n' ' ')
	done
}

check_exit_codes_documented() {
	local codes code section
	codes=$(sed -n 's/^[[:space:]]*FERRY_[A-Z]* = \([0-9]*\),.*/\1/p' \
		"$FERRY_SRCDIR/include/ferry.h")
	section=$(sed -n '/^\.Sh EXIT STATUS/,/^\.Sh /p' "$MAN")
	check "enum ferry_code has the exit codes" test -n "$codes"
	for code in $codes; do
		if grep -qE "^\.It (Sy |Li )?$code\$" <<<"$section"; then
			ok "man page EXIT STATUS lists $code"
		else
			fail "man page EXIT STATUS lists $code"
		fi
	done
	# --help: "exit codes: 0 success, 1 usage error, ..." up to the end
	sed -n '/^exit codes:/,$p' "$LOG/help" | tr '\n' ' ' |
		sed 's/^exit codes://' | tr ',' '\n' |
		sed -n 's/^ *\([0-9][0-9]*\) .*/\1/p' | sort -u >"$LOG/help.codes"
	tr ' ' '\n' <<<"$codes" | sed '/^$/d' | sort -u >"$LOG/enum.codes"
	same_set "--help's exit codes are enum ferry_code's" "$LOG/enum.codes" "$LOG/help.codes"
}

check_man_content() {
	check "man page names XDG_STATE_HOME" grep -q XDG_STATE_HOME "$MAN"
	check "man page names the default manifest directory" grep -q 'local/state/ferry' "$MAN"
	check "man page documents ferry status" grep -qE '^\.Nm( ferry)? status|Cm status' "$MAN"
	check "man page documents durability modes" grep -q 'Fl -durability' "$MAN"
}

check_man_renders() {
	if command -v mandoc >/dev/null 2>&1; then
		mandoc -T lint -W warning "$MAN" >"$LOG/lint" 2>&1
		check "mandoc -T lint finds nothing" test ! -s "$LOG/lint"
		show "$LOG/lint"
	elif command -v groff >/dev/null 2>&1; then
		groff -mandoc -ww -z "$MAN" >"$LOG/lint" 2>&1
		check "groff -ww renders without warnings" test ! -s "$LOG/lint"
		show "$LOG/lint"
		groff -mandoc -Tascii -P-cbou "$MAN" 2>/dev/null >"$LOG/rendered"
		check "rendered page has the EXIT STATUS section" grep -q 'EXIT STATUS' "$LOG/rendered"
	else
		say "SKIP rendering: neither mandoc nor groff installed"
	fi
}

check_help_and_version
check_options_documented
check_defaults_documented
check_exit_codes_documented
check_man_content
check_man_renders
finish
