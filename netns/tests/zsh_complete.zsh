#!/usr/bin/env zsh
# zsh_complete.zsh FPATH_DIR LINE: prints, one per line, the matches zsh's completion system
# offers for the command line LINE followed by a Tab, as an interactive zsh would (a zsh started on a
# pseudo-terminal with compinit, the completion functions of FPATH_DIR first in fpath). compadd is
# wrapped to print what it adds; the shell exits when the completion ends. Used by completion.sh.
emulate -L zsh
zmodload zsh/zpty || exit 2
dir=$1
shift
init=$(mktemp)
trap 'rm -f $init' EXIT
cat >$init <<'INIT'
PROMPT='' RPROMPT=''
fpath=($TG_COMPLETION_DIR $fpath)
autoload -Uz compinit && compinit -u -D
bindkey '^I' complete-word
# Between the two markers: one match a line. Then the shell exits.
__tg_marker () { print -rn -- $'\0MARK\n' }
compprefuncs=(__tg_marker)
comppostfuncs=(__tg_marker exit)
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
compadd () {
  # Calls that only ask (-O, -A, -D: into an array) are passed through.
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a __hits
  builtin compadd -A __hits "$@"
  (( $#__hits )) && print -rl -- $__hits
  builtin compadd "$@"
}
print ready
INIT
export TG_COMPLETION_DIR=$dir
zpty z zsh -f -i
zpty -w z ". $init"
# Wait (bounded) for the shell to have read the setup.
local line
integer n=0
while (( n++ < 200 )); do
  zpty -r -t z line 2>/dev/null || { sleep 0.05; continue }
  [[ $line == ready* ]] && break
done
(( n < 200 )) || { print -u2 "zsh did not start"; exit 2 }
zpty -w -n z "$1"$'\t'
integer marks=0
while zpty -r z line; do
  line=${line%$'\r'}
  line=${line%$'\n'}
  line=${line%$'\r'}
  if [[ $line == *$'\0MARK'* ]]; then
    (( marks++ ))
    (( marks == 2 )) && break
    continue
  fi
  (( marks == 1 )) && print -r -- $line
done
zpty -d z 2>/dev/null
