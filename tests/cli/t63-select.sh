#!/bin/bash
# t63-select: --include/--exclude (rsync's first-match rules), --files-from
# (--from0, stdin), --min-size/--max-size, checked against rsync itself.
#
# Proves:
#  - each set of rules copies exactly what `rsync -a` with the same rules
#    copies (find's listing of types and paths, diff -r of the content);
#  - -n lists exactly the files rsync -n would send, and writes nothing;
#  - a re-run with other rules and --delete deletes exactly what
#    `rsync -n --delete` with those rules would (excluded files, excluded
#    directories and files outside the size bounds are protected, also when
#    they are gone from SRC); their manifest rows stay done, not removed;
#    a later run without rules copies nothing again (no "changed" storm),
#    and its --delete then deletes what is really gone;
#  - a file that grew past --max-size since it was copied keeps its copy;
#  - --files-from (newline, and NUL from stdin) copies what rsync's
#    --files-from copies; a listed path missing in SRC is a warning and exit
#    24, the rest is copied;
#  - --verify with rules checks only what they take in;
#  - bad input (unreadable --files-from, "..", size 12Q, 1.5M, min above
#    max, empty pattern, "***", "!", --from0 alone) is exit 1, one error
#    line, nothing copied.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd rsync
need_cmd sqlite3

put() { # put FILE [BYTES]: FILE with content of its name, or BYTES random
	mkdir -p "$(dirname "$1")"
	if [[ -n ${2-} ]]; then head -c "$2" /dev/urandom >"$1"; else printf '%s\n' "$1" >"$1"; fi
}

build_tree() {
	local f
	for f in top.c top.o keep.tmp junk.tmp a/x.c a/x.o a/b/y.c a/b/y.h \
		'a/sp ace.c' c/z.txt skip/q.c skip/in/r.c cache/k.c d/cache \
		top/m/deep1 top/m/n/deep2 top/deep3 sub/xa sub/ya e/sub/xb; do
		put "src/$f"
	done
	put src/big.bin 5000
	put src/a/big.c 3000
	mkdir -p src/empty
}

listing() { # listing DIR: "type path" of everything below DIR
	(cd "$1" && find . -mindepth 1 -printf '%y %P\n' | sort)
}

# same_as_rsync NAME RULES...: ferry and rsync -a with RULES into fresh
# DSTs hold the same entries and content.
same_as_rsync() {
	local name=$1
	shift
	rm -rf "f.$name" "r.$name"
	expect_code 0 "$FERRY" --manifest "m.$name.db" "$@" src "f.$name"
	rsync -a "$@" src/ "r.$name/" || die "rsync $name"
	listing "f.$name" >"$LOG/f.$name"
	listing "r.$name" >"$LOG/r.$name"
	same_set "$name: ferry copies what rsync copies" "$LOG/r.$name" "$LOG/f.$name"
	check "$name: diff -r against rsync's copy" diff -r "f.$name" "r.$name"
}

build_tree

RULES1=(--include '*/' --include '*.c' --exclude '*')
RULES2=(--exclude '/top/**/deep*' --exclude 'sub/x*' --include keep.tmp
	--exclude '*.tmp' --exclude cache/ --exclude '/a/b/')
RULES3=(--include /a/ --include '/a/**' --exclude '*')
RULES4=(--include '[a-c]/' --exclude '/*/' --include '*.[ch]' --exclude '*')
same_as_rsync rules1 "${RULES1[@]}"
same_as_rsync rules2 "${RULES2[@]}"
same_as_rsync rules3 "${RULES3[@]}"
same_as_rsync rules4 "${RULES4[@]}"
same_as_rsync sizes --min-size 20 --max-size 4K
check "sizes: the 5000-byte file is left out" test ! -e f.sizes/big.bin
check "sizes: the 3000-byte file is copied" cmp -s src/a/big.c f.sizes/a/big.c

# ---- random rule sets against rsync (a fixed seed: the same every run) ----
RANDOM=63
PATS=('*.c' 'a/b' '/a/b' 'b/' '**/y.c' 'a/**' '/a/**/y.c' '*/' '[ab]' '[!a]*'
	'b*/y*' '?' 'x.?' 'sp\ *' '**' 'a/*' '*/y.c' 'a/b/' '/*/' '**.c' 'cache'
	'm' '/top/' 'deep*' 'sub/x?' '*.[!c]')
odd=0
for i in $(seq 1 40); do
	args=()
	for j in $(seq 1 $((RANDOM % 3 + 1))); do
		p=${PATS[$((RANDOM % ${#PATS[@]}))]}
		if ((RANDOM % 2)); then args+=(--include "$p"); else args+=(--exclude "$p"); fi
	done
	((RANDOM % 2)) && args+=(--exclude '*')
	rm -f m.rnd.db
	"$FERRY" -n -v --manifest m.rnd.db "${args[@]}" src rnd 2>/dev/null |
		while IFS= read -r p; do [[ -d src/$p ]] || printf '%s\n' "$p"; done |
		sort >"$LOG/rnd.f"
	rsync -an --out-format='%n' "${args[@]}" src/ rnd/ | grep -v '/$' | sort >"$LOG/rnd.r"
	cmp -s "$LOG/rnd.f" "$LOG/rnd.r" || { odd=$((odd + 1)); say "differs: $(quote_cmd "${args[@]}")"; }
done
check "40 random rule sets: ferry -n lists what rsync -n lists ($odd differ)" test "$odd" = 0

# ---- an excluded directory is not read; --files-from stats only what it names
if have_strace; then
	rm -rf st
	env "$(no_leak_check_env)" strace -f -o "$LOG/trace" -e trace=open,openat,stat,lstat,newfstatat,statx \
		"$FERRY" --manifest m.st.db --exclude skip/ --exclude /top/ src st >/dev/null 2>&1
	check "--exclude skip/: skip/ itself is never opened" \
		test "$(grep -c '"skip"' "$LOG/trace" | head -1)" -le 1
	check "--exclude skip/: nothing below it is looked at" \
		bash -c "! grep -qE '\"(in|q\\.c|r\\.c)\"' '$LOG/trace'"
	check "--exclude /top/: nothing below it is looked at" \
		bash -c "! grep -qE '\"(m|deep1|deep3|n)\"' '$LOG/trace'"
	printf '%s\n' top.o >one
	rm -rf st
	env "$(no_leak_check_env)" strace -f -o "$LOG/trace" -e trace=open,openat,stat,lstat,newfstatat,statx \
		"$FERRY" --manifest m.st1.db --files-from one src st >/dev/null 2>&1
	check "--files-from top.o: no other entry of SRC is even stat'ed" \
		bash -c "! grep -qE '\"(top\\.c|big\\.bin|junk\\.tmp|a|c|skip)\"' '$LOG/trace'"
	check "--files-from top.o: top.o is copied" cmp -s src/top.o st/top.o
else
	say "no strace: the not-read checks are skipped"
fi

# ---- dry run --------------------------------------------------------------
expect_code 0 "$FERRY" -n -v --manifest m.dry.db "${RULES2[@]}" src dry
check "-n writes no DST" test ! -e dry
verbose_copied "$LOG/out" | while IFS= read -r p; do
	[[ -d src/$p ]] || printf '%s\n' "$p"
done >"$LOG/dry.ferry"
rsync -an --out-format='%n' "${RULES2[@]}" src/ dry/ | grep -v '/$' >"$LOG/dry.rsync"
same_set "-n lists exactly the files rsync -n sends" "$LOG/dry.rsync" "$LOG/dry.ferry"

# ---- a re-run with other rules: what they leave out is protected ----------
put src/g.bin 100
expect_code 0 "$FERRY" src dst # g.bin copied at 100 bytes
rm src/a/x.o src/a/x.c src/skip/q.c src/c/z.txt
head -c 5000 /dev/urandom >src/g.bin # grows past the bound below
cp src/g.bin "$LOG/g.new"
cp -a dst snap
PROTECT=(--exclude '*.c' --exclude skip/ --max-size 1K)
rsync -an -i --delete "${PROTECT[@]}" src/ snap/ |
	sed -n 's/^\*deleting  *//p' | grep -v '/$' >"$LOG/del.rsync"
expect_code 0 "$FERRY" -v --delete "${PROTECT[@]}" src dst
verbose_deleted "$LOG/out" >"$LOG/del.ferry"
same_set "--delete with rules deletes what rsync -n --delete would" \
	"$LOG/del.rsync" "$LOG/del.ferry"
printf '%s\n' a/x.o c/z.txt >"$LOG/expect.del"
same_set "the deletions are a/x.o and c/z.txt (gone, and taken in)" \
	"$LOG/expect.del" "$LOG/del.ferry"
verbose_copied "$LOG/out" >"$LOG/copied"
check "nothing copied (g.bin is past --max-size now)" test ! -s "$LOG/copied"
for f in a/x.c skip/q.c a/b/y.c big.bin; do
	check "protected: DST keeps $f" test -f "dst/$f"
done
check "g.bin keeps the copy made before it grew" test "$(stat -c %s dst/g.bin)" = 100
M=$(manifest_path src dst)
[[ -f $M ]] || die "no manifest for src dst"
state_of() { # state_of DIR NAME: the row's state
	sqlite3 -readonly "$M" "SELECT f.state FROM files f JOIN dirs d ON d.id = f.dir
		WHERE d.path = CAST('$1' AS BLOB) AND f.name = CAST('$2' AS BLOB)"
}
check "row of the excluded a/x.c (gone from SRC) is done, not removed" test "$(state_of a x.c)" = 1
check "row of skip/q.c below an excluded dir is done" test "$(state_of skip q.c)" = 1
check "row of g.bin (grown past --max-size) is done" test "$(state_of '' g.bin)" = 1
check "row of the deleted c/z.txt is gone" test -z "$(state_of c z.txt)"

# the same rules again: nothing to do, nothing deleted, and a/ (whose
# excluded *.c rows its listing does not see) is not taken for changed:
# MF_MTIME_NONE (-1) would make the next scan apply its metadata again
a_mtime() { sqlite3 -readonly "$M" "SELECT mtime_ns FROM dirs WHERE path = CAST('a' AS BLOB)"; }
expect_code 0 "$FERRY" -v --delete "${PROTECT[@]}" src dst
check "the same rules again: nothing copied or deleted" test ! -s "$LOG/out"
check "no churn: a/'s row keeps its mtime ($(a_mtime))" test "$(a_mtime)" != -1
expect_code 0 "$FERRY" -q "${PROTECT[@]}" src dst
check "no churn: a/'s row keeps its mtime, once more ($(a_mtime))" test "$(a_mtime)" != -1

# no rules: exactly g.bin (changed) is copied, no storm of the rest
expect_code 0 "$FERRY" -v src dst
verbose_copied "$LOG/out" >"$LOG/copied"
printf '%s\n' g.bin >"$LOG/expect.copied"
same_set "without rules only the changed g.bin is copied" "$LOG/expect.copied" "$LOG/copied"
check "g.bin is the grown one now" cmp -s "$LOG/g.new" dst/g.bin
expect_code 0 "$FERRY" -v --delete src dst
verbose_deleted "$LOG/out" | grep -v '/$' >"$LOG/del.ferry"
printf '%s\n' a/x.c skip/q.c >"$LOG/expect.del"
same_set "without rules, --delete deletes what is really gone" "$LOG/expect.del" "$LOG/del.ferry"
tree_equal src dst

# ---- --verify with rules --------------------------------------------------
printf 'garbage\n' >dst/a/b/y.c # excluded below: not checked
expect_code 0 "$FERRY" --verify --exclude '*.c' src dst
expect_code 5 "$FERRY" --verify src dst
check "--verify without rules names the damaged file" grep -q 'a/b/y.c' "$LOG/err" "$LOG/out"
expect_code 0 "$FERRY" src dst
tree_equal src dst

# ---- --files-from ---------------------------------------------------------
# (no trailing '/' on skip: rsync would copy that directory's own entries)
printf '%s\n' ./top.o /a/b/y.c '' 'a/sp ace.c' skip missing/file top/m/n/deep2 \
	>list
rm -rf ff rf
expect_code 24 "$FERRY" --manifest m.ff.db --files-from list src ff
check "the missing listed path is a warning" grep -q "missing/file.*--files-from" "$LOG/err"
rsync -a --files-from=list src/ rf/ 2>/dev/null
listing ff >"$LOG/ff"
listing rf >"$LOG/rf"
same_set "--files-from copies what rsync --files-from copies" "$LOG/rf" "$LOG/ff"
check "--files-from: diff -r against rsync's copy" diff -r ff rf
check "a listed directory is made, not descended into" test -d ff/skip -a ! -e ff/skip/in
rm -rf ff0
printf '%s\0' top.o a/b/y.c 'a/sp ace.c' skip top/m/n/deep2 |
	"$FERRY" --manifest m.ff0.db --files-from - --from0 src ff0 >"$LOG/out" 2>"$LOG/err"
RC=$?
check "--from0 from stdin: exit 0 (got $RC)" test "$RC" = 0
listing ff0 >"$LOG/ff0"
same_set "--from0 from stdin copies the same" "$LOG/rf" "$LOG/ff0"
# a re-run with the list and --delete deletes nothing it does not list
expect_code 24 "$FERRY" -v --delete --files-from list src dst
check "--files-from --delete: nothing deleted, nothing copied" test ! -s "$LOG/out"
tree_equal src dst

# ---- bad input: exit 1, nothing copied -------------------------------------
bad() { # bad WHAT ARGS...: exit 1, one error line naming WHAT, no DST
	expect_code 1 "$FERRY" "$@" src bad && stderr_is_one_error
	check "$1: the error says '$BADWORD'" grep -q -- "$BADWORD" "$LOG/err"
	check "$1: nothing copied" test ! -e bad
}
printf '../etc/passwd\n' >dotdot
mkdir adir
BADWORD=files-from bad --files-from /nonexistent/list
BADWORD=files-from bad --files-from adir
BADWORD=.. bad --files-from dotdot
BADWORD=12Q bad --max-size 12Q
BADWORD=1.5M bad --min-size 1.5M
BADWORD=min-size bad --min-size 2K --max-size 1K
BADWORD=include bad --include ''
BADWORD='\*\*\*' bad --exclude 'a/***'
BADWORD="'!'" bad --include '!'
BADWORD=from0 bad --from0
finish
