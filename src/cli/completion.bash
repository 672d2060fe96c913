# bash completion for ferry(1), installed as
# share/bash-completion/completions/ferry (cmake/Install.cmake).
#
# The options come from `ferry --help` of the ferry being completed, the
# one option table (cli.c): an option added there completes without an
# edit here. The values of --format, --durability and --verify, the
# commands status, export and set, and directories for SRC and DST are known
# here. Needs nothing of the bash-completion package.

_ferry_options() {
	"$1" --help 2>/dev/null | grep -oE -- '(^|[[:space:]])--?[a-zA-Z][a-zA-Z0-9-]*' |
		tr -d ' \t' | sort -u
}

_ferry() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local opt= pre=
	COMPREPLY=()
	# bash splits "--format=cs" at '=' (COMP_WORDBREAKS) into three words
	if [[ $cur == = ]]; then
		opt=$prev cur=
	elif [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
		opt=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $cur == --*=* ]]; then
		opt=${cur%%=*} pre=${cur%%=*}= cur=${cur#*=}
	elif [[ $prev != --verify ]]; then # its value only after '='
		opt=$prev
	fi
	case $opt in
	--format)
		COMPREPLY=($(compgen -P "$pre" -W 'xxh128sum csv jsonl' -- "$cur"))
		return ;;
	--durability)
		COMPREPLY=($(compgen -P "$pre" -W 'batch file none' -- "$cur"))
		return ;;
	--verify)
		COMPREPLY=($(compgen -P "$pre" -W 'dest source both' -- "$cur"))
		return ;;
	--manifest | --log-file)
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	-j | --jobs | --retries | --max-delete | --exclude | --bwlimit | --window)
		return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_ferry_options "${COMP_WORDS[0]}")" -- "$cur"))
		return
	fi
	compopt -o filenames 2>/dev/null
	COMPREPLY=($(compgen -d -- "$cur"))
	# the first operand may be a command
	local i n=0
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-j | --jobs | --retries | --max-delete | --exclude | --manifest | --log-file | \
			--durability | --format | --bwlimit | --window | =) i=$((i + 1)) ;;
		-*) ;;
		*) n=$((n + 1)) ;;
		esac
	done
	((n == 0)) && COMPREPLY+=($(compgen -W 'status export set' -- "$cur"))
	return 0
}

complete -F _ferry ferry
