#!/bin/bash
# t51-install: `cmake --install` and `cpack -G DEB` put ferry in place as
# README.md says, from a fresh plain build of the source tree.
#
# Proves:
#  - with DESTDIR and CMAKE_INSTALL_PREFIX, the install holds exactly the
#    binary, the man page and the bash and zsh completions, under the
#    prefix inside DESTDIR (GNUInstallDirs), and the installed binary runs;
#  - `man -l` renders the installed page without warnings, and man finds it
#    by name through MANPATH (it is where man looks);
#  - the installed bash completion, sourced, completes an option
#    (--form -> --format), a value (--format=c -> csv), the commands, and
#    every option --help lists (it reads them from --help); the zsh one
#    parses (zsh -n) where zsh is installed;
#  - cpack -G DEB builds a .deb whose Depends name libsqlite3-0 and
#    libxxhash0 (found by dpkg-shlibdeps) but not libpq5, which it
#    Recommends (loaded only for a shared manifest), holding the same four files
#    under /usr (zsh's in vendor-completions, where Debian's zsh looks),
#    from the same build configured for another prefix; its binary, taken
#    out with dpkg-deb -x, prints its version; as root, `dpkg -i` installs it
#    on this machine (unless a ferry package or /usr/bin/ferry is there
#    already) and /usr/bin/ferry --version runs, and a trap removes it
#    again (dpkg -r), whatever happens.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd cmake man

VERSION=$(sed -n 's/^project(ferry VERSION \([0-9.]*\).*/\1/p' "$FERRY_SRCDIR/CMakeLists.txt")
PREFIX=/opt/ferry-t51

build() {
	cmake -S "$FERRY_SRCDIR" -B "$T/build" -DCMAKE_BUILD_TYPE=Release \
		-DBUILD_TESTING=OFF -DCMAKE_INSTALL_PREFIX="$PREFIX" \
		>"$LOG/configure" 2>&1 || {
		show "$LOG/configure"
		die "cmake configure failed"
	}
	cmake --build "$T/build" -j2 --target ferry >"$LOG/build" 2>&1 || {
		show "$LOG/build"
		die "cmake --build failed"
	}
}

check_install() {
	DESTDIR=$T/dest cmake --install "$T/build" >"$LOG/install" 2>&1
	check "DESTDIR=... cmake --install exits 0" test $? = 0
	show "$LOG/install"
	(cd "$T/dest" && find . ! -type d | sort) >"$LOG/installed"
	printf '%s\n' ".$PREFIX/bin/ferry" ".$PREFIX/share/bash-completion/completions/ferry" \
		".$PREFIX/share/man/man1/ferry.1" ".$PREFIX/share/zsh/site-functions/_ferry" \
		>"$LOG/want"
	same_set "the install holds the binary, man page and completions, under DESTDIR/PREFIX" \
		"$LOG/want" "$LOG/installed"
	BIN=$T/dest$PREFIX/bin
	run "$BIN/ferry" --version
	check "the installed ferry runs: 'ferry $VERSION'" \
		test "$RC" = 0 -a "$(head -n1 "$LOG/out")" = "ferry $VERSION"
}

check_man() {
	local page=$T/dest$PREFIX/share/man/man1/ferry.1
	MANWIDTH=80 man --warnings -l "$page" >"$LOG/man.out" 2>"$LOG/man.err"
	check "man -l renders the installed page" test $? = 0 -a -s "$LOG/man.out"
	check "... without warnings" test ! -s "$LOG/man.err"
	show "$LOG/man.err"
	check "... with the export command and EXIT STATUS" \
		grep -q 'ferry export' "$LOG/man.out"
	grep -q 'EXIT STATUS' "$LOG/man.out" || fail "rendered page has EXIT STATUS"
	MANPATH=$T/dest$PREFIX/share/man MANWIDTH=80 man ferry >"$LOG/man2.out" 2>&1
	check "man finds the page by name under PREFIX/share/man" \
		grep -q 'ferry export' "$LOG/man2.out"
}

# complete WORD...: what the installed bash completion offers for the
# command line "WORD..." (the last word is the one completed).
complete_words() {
	PATH=$BIN:$PATH bash -c '
		source "$1" || exit 1
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		_ferry
		printf "%s\n" "${COMPREPLY[@]}"' complete \
		"$T/dest$PREFIX/share/bash-completion/completions/ferry" "$@"
}

check_completion() {
	local file=$T/dest$PREFIX/share/bash-completion/completions/ferry
	check "the bash completion registers _ferry for ferry" \
		bash -c "source '$file' && complete -p ferry | grep -q -- '-F _ferry'"
	check "ferry --form<TAB> completes --format" \
		test "$(complete_words ferry --form)" = --format
	check "ferry export --format=c<TAB> completes csv" \
		test "$(complete_words ferry export --format = c)" = csv
	check "ferry --durability=f<TAB> (one word) completes --durability=file" \
		test "$(complete_words ferry --durability=f)" = --durability=file
	check "ferry e<TAB> offers export" \
		grep -qx export <(complete_words ferry e)
	check "ferry SRC e<TAB> does not offer export (an operand was given)" \
		test -z "$(cd "$T" && complete_words ferry src e)"
	"$BIN/ferry" --help | grep -oE -- '(^|[[:space:]])--?[a-zA-Z][a-zA-Z0-9-]*' |
		tr -d ' \t' | sort -u >"$LOG/help.opts"
	complete_words ferry - | sort -u >"$LOG/completed"
	same_set "ferry -<TAB> offers every option --help lists" "$LOG/help.opts" "$LOG/completed"
	if command -v zsh >/dev/null 2>&1; then
		check "the zsh completion parses (zsh -n)" \
			zsh -n "$T/dest$PREFIX/share/zsh/site-functions/_ferry"
	else
		say "SKIP zsh -n: zsh is not installed"
	fi
}

DEB_INSTALLED=
cleanup_deb() {
	[[ -n $DEB_INSTALLED ]] && dpkg -r ferry >/dev/null 2>&1
	DEB_INSTALLED=
}
trap 'cleanup_deb; cleanup' EXIT

check_deb() {
	if ! command -v dpkg-shlibdeps >/dev/null 2>&1 || ! command -v cpack >/dev/null 2>&1; then
		say "SKIP the .deb: needs cpack and dpkg-shlibdeps (package dpkg-dev)"
		return
	fi
	# the package installs under /usr whatever the build's prefix
	(cd "$T/build" && cpack -G DEB -B "$T/pkg") >"$LOG/cpack" 2>&1
	check "cpack -G DEB exits 0" test $? = 0
	local deb
	deb=$(ls "$T/pkg"/ferry_"$VERSION"_*.deb 2>/dev/null | head -n1)
	check "it builds ferry_${VERSION}_ARCH.deb" test -f "$deb" || {
		show "$LOG/cpack"
		return
	}
	local depends
	depends=$(dpkg-deb -f "$deb" Depends)
	say "Depends: $depends"
	check "Depends names libsqlite3-0" grep -q 'libsqlite3-0' <<<"$depends"
	check "Depends names libxxhash0" grep -q 'libxxhash0' <<<"$depends"
	# loaded only for a shared manifest (src/manifest_pg/pq.h)
	check "Depends does not name libpq5" eval '! grep -q libpq <<<"$depends"'
	check "Recommends names libpq5" grep -q 'libpq5' <<<"$(dpkg-deb -f "$deb" Recommends)"
	dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $NF}' | sort >"$LOG/deb.files"
	printf '%s\n' ./usr/bin/ferry ./usr/share/bash-completion/completions/ferry \
		./usr/share/man/man1/ferry.1 ./usr/share/zsh/vendor-completions/_ferry >"$LOG/deb.want"
	same_set "the .deb holds the four files under /usr (zsh: vendor-completions)" \
		"$LOG/deb.want" "$LOG/deb.files"
	dpkg-deb -x "$deb" "$T/debroot"
	run "$T/debroot/usr/bin/ferry" --version
	check "the packaged binary runs: 'ferry $VERSION'" \
		test "$RC" = 0 -a "$(head -n1 "$LOG/out")" = "ferry $VERSION"
	if [[ $(id -u) != 0 ]]; then
		say "SKIP dpkg -i: needs root"
	elif dpkg -s ferry >/dev/null 2>&1 || [[ -e /usr/bin/ferry ]]; then
		say "SKIP dpkg -i: a ferry is installed on this machine already"
	else
		DEB_INSTALLED=1
		dpkg -i "$deb" >"$LOG/dpkg" 2>&1
		check "dpkg -i installs it (its Depends are met)" test $? = 0 || show "$LOG/dpkg"
		run /usr/bin/ferry --version
		check "/usr/bin/ferry --version runs" \
			test "$RC" = 0 -a "$(head -n1 "$LOG/out")" = "ferry $VERSION"
		check "man ferry finds the installed page" \
			bash -c 'MANWIDTH=80 man ferry 2>/dev/null | grep -q "ferry export"'
		cleanup_deb
		check "dpkg -r removes it again" test ! -e /usr/bin/ferry
	fi
}

build
check_install
check_man
check_completion
check_deb
finish
