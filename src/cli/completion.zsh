#compdef ferry
# zsh completion for ferry(1), installed as _ferry in zsh's fpath
# (cmake/Install.cmake).
#
# The options come from `ferry --help` of the ferry being completed, the
# one option table (cli.c); the values of --format, --durability and
# --verify, the commands status, export and set, and directories for SRC and
# DST are known here.

local -a opts
opts=(${(f)"$(_call_program options ${words[1]} --help 2>/dev/null |
	grep -oE -- '(^|[[:space:]])--?[a-zA-Z][a-zA-Z0-9-]*' | tr -d ' \t' |
	sort -u)"})

case $words[CURRENT-1] in
--format) compadd xxh128sum csv jsonl; return ;;
--durability) compadd batch file none; return ;;
--manifest|--log-file) _files; return ;;
-j|--jobs|--retries|--max-delete|--exclude|--bwlimit|--window) _message value; return ;;
esac
case $PREFIX in
--format=*) compset -P '*='; compadd xxh128sum csv jsonl; return ;;
--durability=*) compset -P '*='; compadd batch file none; return ;;
--verify=*) compset -P '*='; compadd dest source both; return ;;
-*) compadd -- $opts; return ;;
esac
local -a operands
operands=(${words[2,CURRENT-1]:#-*})
(( $#operands == 0 )) && compadd status export set
_files -/
