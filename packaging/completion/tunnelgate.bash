# bash completion for tunnelgate(8). Installed as
# /usr/share/bash-completion/completions/tunnelgate; needs nothing from bash-completion itself.
#
# Completes the subcommands, each one's options, network namespaces after --netns, and:
#   validate, plan, up,   configured names (/etc/tunnelgate/NAME.json, NAME.conf and
#   exec
#                         /etc/wireguard/NAME.conf) and files
#   down, status, message running tunnels (`tunnelgate status --json`, of --netns NS when given)
#   secret                add, remove, list
#   on-demand             --clean
#   help                  subcommands
# netns/tests/completion.sh checks the lists below against `tunnelgate help`.

_tunnelgate_subcommands="validate plan up exec down status list message secret metrics on-demand help"

# _tunnelgate_options SUBCOMMAND: the options `tunnelgate help SUBCOMMAND` lists.
_tunnelgate_options() {
  case $1 in
  plan) echo "--netns" ;;
  up) echo "--netns --detach --restart" ;;
  exec) echo "--user" ;;
  down) echo "--netns --keep-kill-switch" ;;
  status) echo "--netns --json --watch" ;;
  list) echo "--json" ;;
  message) echo "--netns" ;;
  secret) echo "--replace" ;;
  metrics) echo "--listen --allow-non-loopback --netns --all-namespaces" ;;
  on-demand) echo "--clean" ;;
  esac
}

# _tunnelgate_configured: the names of the configurations in the places `tunnelgate up NAME` looks.
_tunnelgate_configured() {
  local f
  for f in /etc/tunnelgate/*.json /etc/tunnelgate/*.conf /etc/wireguard/*.conf; do
    [ -e "$f" ] || continue
    f=${f##*/}
    printf '%s\n' "${f%.*}"
  done
}

# _tunnelgate_running [NS]: the tunnels `tunnelgate status --json` lists (each report's "name", at
# the indentation of the reports in its "tunnels" array).
_tunnelgate_running() {
  local cmd=${COMP_WORDS[0]:-tunnelgate}
  local args=(status --json)
  [ -n "${1:-}" ] && args+=(--netns "$1")
  "$cmd" "${args[@]}" 2>/dev/null | sed -n 's/^      "name" : "\([^"]*\)",\{0,1\}$/\1/p'
}

_tunnelgate() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=""
  [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()

  # The subcommand: the first word after the command that is not an option.
  local i sub="" netns="" positional=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
    --netns) netns=${COMP_WORDS[i + 1]:-}; i=$((i + 1)) ;;
    --restart | --listen) i=$((i + 1)) ;;
    -*) ;;
    *) if [ -z "$sub" ]; then sub=${COMP_WORDS[i]}; else positional=$((positional + 1)); fi ;;
    esac
  done

  if [ -z "$sub" ]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "--help --version" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$_tunnelgate_subcommands" -- "$cur")
    fi
    return 0
  fi

  if [ "$prev" = --netns ]; then
    local ns=()
    [ -d /run/netns ] && mapfile -t ns < <(ls -1 /run/netns 2>/dev/null)
    # Also the other forms' prefixes; a path completes as a file.
    mapfile -t COMPREPLY < <(compgen -W "${ns[*]} pid: docker: podman:" -- "$cur"; [[ $cur == /* ]] && compgen -f -- "$cur")
    return 0
  fi
  if [ "$prev" = --user ]; then
    mapfile -t COMPREPLY < <(compgen -u -- "$cur")
    return 0
  fi
  if [ "$prev" = --restart ]; then
    mapfile -t COMPREPLY < <(compgen -W "never on-failure" -- "$cur")
    return 0
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_tunnelgate_options "$sub")" -- "$cur")
    return 0
  fi
  [ "$positional" -eq 0 ] || return 0

  case $sub in
  validate | plan | up | exec)
    local names
    names=$(_tunnelgate_configured)
    mapfile -t COMPREPLY < <(compgen -W "$names" -- "$cur"; compgen -f -- "$cur")
    # Directories get a slash and no space, files a space: leave it to readline.
    compopt -o filenames 2>/dev/null
    ;;
  down | status | message)
    mapfile -t COMPREPLY < <(compgen -W "$(_tunnelgate_running "$netns")" -- "$cur")
    ;;
  secret)
    mapfile -t COMPREPLY < <(compgen -W "add remove list" -- "$cur")
    ;;
  help)
    mapfile -t COMPREPLY < <(compgen -W "$_tunnelgate_subcommands" -- "$cur")
    ;;
  esac
  return 0
}

complete -F _tunnelgate tunnelgate
