#!/bin/bash
# t13-xxhsum-oracle: the hashes in the manifest are the XXH3-128 of the
# copied content, as computed by an independent implementation (xxhsum -H2).
#
# The manifest is read with the sqlite3 shell (files: dir, name BLOB, hash:
# 16-byte BLOB, canonical big-endian XXH128; dirs: id, path BLOB, '' for the
# root). Names travel as hex, so newlines and invalid UTF-8 survive. Proves:
#  - every recorded hash is 16 bytes and equals xxhsum -H2 of the DST file
#    (files of awkward sizes around buffer boundaries, sparse files whose hash
#    covers the holes as zeros, hostile names, paths deeper than PATH_MAX);
#  - every regular file in DST has a hash under at least one of its names.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3 xxhsum

build_source() {
	local n
	mkdir -p src/sizes
	for n in 0 1 4095 4096 4097 65535 65536 65537 131072 1048575 1048576 \
		1048577 8388609; do
		head -c "$n" /dev/urandom >"src/sizes/$n"
	done
	make_hostile_tree src/hostile
	gen_tree src/generated --seed 1313 --files 500 --sparse --max-size 3M
}

# unhex HEX: the bytes, in REPLY (bash strings hold any byte but NUL).
unhex() {
	local esc="" i
	for ((i = 0; i < ${#1}; i += 2)); do esc+="\\x${1:i:2}"; done
	printf -v REPLY '%b' "$esc"
}

# xxh128_of ROOT REL: xxhsum -H2 of ROOT/REL, at any depth: when the path is
# too long to open, cd into it one component at a time.
xxh128_of() {
	(
		cd -- "$1" || exit 1
		local rel=$2
		while [[ $rel == */* ]]; do
			cd -- "${rel%%/*}" || exit 1
			rel=${rel#*/}
		done
		xxhsum -H2 <"./$rel" | cut -d' ' -f1
	)
}

# manifest_rows: "dirhex namehex hashhex bytes" for every regular file row.
manifest_rows() {
	sqlite3 -readonly "$(manifest_path src dst)" "
		SELECT hex(d.path), hex(f.name), lower(hex(f.hash)), length(f.hash)
		FROM files f JOIN dirs d ON d.id = f.dir
		WHERE f.type = 1 AND f.hash IS NOT NULL;"
}

check_hashes() {
	local dirhex namehex hash len rel bad=0 n=0 got
	local -A hashed=()
	manifest_rows >"$LOG/rows" || {
		fail "manifest readable with sqlite3"
		return
	}
	local -a rels=() hashes=() lens=() plain=()
	while IFS='|' read -r dirhex namehex hash len; do
		unhex "$dirhex"
		rel=$REPLY
		unhex "$namehex"
		rel=${rel:+$rel/}$REPLY
		rels+=("$rel") hashes+=("$hash") lens+=("$len")
		# names xxhsum prints as they are, paths it can open
		[[ $rel != *[$'\n\\']* && ${#rel} -lt 4000 ]] && plain+=("$rel")
	done <"$LOG/rows"
	# one xxhsum for those; the others one by one (xxh128_of)
	local line
	local -A sum=()
	while IFS= read -r line; do
		sum[${line#*  }]=${line%%  *}
	done < <(cd dst && printf '%s\0' "${plain[@]}" | xargs -0 -r xxhsum -H2 --)
	local i
	for i in "${!rels[@]}"; do
		rel=${rels[i]} hash=${hashes[i]} len=${lens[i]}
		n=$((n + 1))
		hashed[$rel]=1
		if [[ -n ${sum[$rel]+set} ]]; then
			got=${sum[$rel]}
		else
			got=$(xxh128_of dst "$rel")
		fi
		if [[ $len != 16 || $got != "$hash" ]]; then
			bad=$((bad + 1))
			((bad <= 5)) && say "$(printf '%q' "$rel"): manifest $hash ($len bytes), xxhsum ${got:-?}"
		fi
	done
	if ((n > 0 && bad == 0)); then
		ok "all $n manifest hashes equal xxhsum -H2 of the DST files"
	else
		fail "all $n manifest hashes equal xxhsum -H2 of the DST files ($bad differ)"
	fi

	# every inode among the regular files has a hashed name
	local rec ino missing=0
	local -A covered=() seen=()
	while IFS= read -r -d '' rec; do
		ino=${rec%%/*}
		seen[$ino]=${rec#*/}
		[[ -n ${hashed[${rec#*/}]-} ]] && covered[$ino]=1
	done < <(find dst -type f -printf '%i/%P\0')
	for ino in "${!seen[@]}"; do
		if [[ -z ${covered[$ino]-} ]]; then
			missing=$((missing + 1))
			((missing <= 5)) && say "no hash for $(printf '%q' "${seen[$ino]}")"
		fi
	done
	check "every regular file in DST has a hash ($missing without)" test $missing = 0
}

build_source
expect_code 0 "$FERRY" -q src dst
tree_equal src dst
check_hashes
finish
