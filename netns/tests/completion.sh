#!/usr/bin/env bash
# completion: the bash and zsh completion of tunnelgate offer what `tunnelgate help` says (subcommands,
# each one's options), the configured names (/etc/tunnelgate/NAME.json|.conf, /etc/wireguard/NAME.conf),
# network namespaces after --netns, and the tunnels running in the namespace (`tunnelgate status --json`).
#
#   ┌─ C (netns/lib.sh's client namespace) ─────────────────────────────────────────┐
#   │ tunnelgate up tgcomp.json --detach            the running tunnel "tgcomp"     │
#   │ a private mount namespace: a tmpfs on /etc holding only                       │
#   │   /etc/tunnelgate/{home.json,office.conf,notes.txt}, /etc/wireguard/wg9.conf   │
#   │ bash: source tunnelgate.bash, set COMP_WORDS/COMP_CWORD, call _tunnelgate     │
#   │ zsh:  an interactive zsh on a pty (zsh_complete.zsh), the line and a Tab      │
#   └───────────────────────────────────────────────────────────────────────────────┘
#   L: the same with no tunnel running there.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

completion_dir=$TG_ROOT/packaging/completion
# The command as a user types it: `tunnelgate`, found on PATH.
mkdir -p "$TG_TMP/bin" "$TG_TMP/empty"
ln -s "$(readlink -f "$TG")" "$TG_TMP/bin/tunnelgate"

cfg=$TG_TMP/tgcomp.json
tg_full_tunnel_config "$cfg" tgcomp
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "a tunnel tgcomp runs in C" 0 || tg_bail "no tunnel to complete" "$TG_ERR"

# complete SHELL NS LINE: the matches SHELL offers for LINE (a trailing space: the next word), one a
# line, sorted, run in NS with the fake /etc and an empty working directory.
complete() {
  local shell=$1 ns=$2 line=$3
  ip netns exec "$ns" unshare --mount --propagation private -- env PATH="$TG_TMP/bin:$PATH" bash -c '
    shell=$1 dir=$2 line=$3 empty=$4
    mount -t tmpfs tmpfs /etc || exit 2
    mkdir /etc/tunnelgate /etc/wireguard
    touch /etc/tunnelgate/home.json /etc/tunnelgate/office.conf /etc/tunnelgate/notes.txt /etc/wireguard/wg9.conf
    cd "$empty" || exit 2
    if [ "$shell" = zsh ]; then
      exec zsh -f "$TG_ROOT/netns/tests/zsh_complete.zsh" "$dir" "$line"
    fi
    . "$dir/tunnelgate.bash"
    read -ra COMP_WORDS <<<"$line"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE=$line COMP_POINT=${#line}
    _tunnelgate
    printf "%s\n" "${COMPREPLY[@]}"' complete "$shell" "$completion_dir" "$line" "$TG_TMP/empty" | grep . | sort
}

# What `tunnelgate help` says: the subcommands, and each one's options (its USAGE line and OPTIONS).
subcommands=$("$TG" --help | sed -n '/^SUBCOMMANDS:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' | sort)
options_of() {
  "$TG" help "$1" | awk '/^USAGE:/ || /^OPTIONS:/ { on = 1 } /^$/ { on = 0 } on' |
    grep -oE '(^|[ [])--[a-z][a-z-]*' | sed 's/^[ [ ]*//' | sort -u
}
check_eq "tunnelgate --help lists twelve subcommands" 12 "$(printf '%s\n' "$subcommands" | grep -c .)"
check_eq "tunnelgate help up names --netns, --detach and --restart" $'--detach\n--netns\n--restart' "$(options_of up)"

shells=(bash)
if command -v zsh >/dev/null; then
  shells+=(zsh)
  zmod=$(zsh -fc 'zmodload zsh/zpty && echo yes' 2>&1)
  check_eq "zsh has its zpty module (the zsh checks drive an interactive zsh through it)" yes "$zmod"
else
  tg_fail "zsh is installed (Scripts/setup.sh installs it): the zsh completion is not checked"
fi

for sh in "${shells[@]}"; do
  check_eq "$sh: 'tunnelgate <Tab>' offers every subcommand" "$subcommands" "$(complete "$sh" "$NS_C" "tunnelgate ")"
  check_eq "$sh: 'tunnelgate st<Tab>' offers status" "status" "$(complete "$sh" "$NS_C" "tunnelgate st")"
  check_eq "$sh: 'tunnelgate --<Tab>' offers --help and --version" $'--help\n--version' "$(complete "$sh" "$NS_C" "tunnelgate --")"
  for sub in $subcommands; do
    check_eq "$sh: 'tunnelgate $sub --<Tab>' offers the options tunnelgate help $sub names" \
      "$(options_of "$sub")" "$(complete "$sh" "$NS_C" "tunnelgate $sub --")"
  done
  check_eq "$sh: 'tunnelgate help <Tab>' offers every subcommand" "$subcommands" "$(complete "$sh" "$NS_C" "tunnelgate help ")"
  # Configured names: .json and .conf in /etc/tunnelgate, .conf in /etc/wireguard; not notes.txt.
  check_eq "$sh: 'tunnelgate up <Tab>' offers the configured names" $'home\noffice\nwg9' \
    "$(complete "$sh" "$NS_C" "tunnelgate up ")"
  check_eq "$sh: 'tunnelgate validate o<Tab>' offers office" "office" "$(complete "$sh" "$NS_C" "tunnelgate validate o")"
  check_eq "$sh: 'tunnelgate plan --netns $NS_C w<Tab>' offers wg9" "wg9" \
    "$(complete "$sh" "$NS_C" "tunnelgate plan --netns $NS_C w")"
  # Running tunnels, of the namespace the completion runs in.
  check_eq "$sh: in C, 'tunnelgate down <Tab>' offers the running tgcomp" "tgcomp" "$(complete "$sh" "$NS_C" "tunnelgate down ")"
  check_eq "$sh: in C, 'tunnelgate status tg<Tab>' offers tgcomp" "tgcomp" "$(complete "$sh" "$NS_C" "tunnelgate status tg")"
  check_eq "$sh: in C, 'tunnelgate message <Tab>' offers tgcomp" "tgcomp" "$(complete "$sh" "$NS_C" "tunnelgate message ")"
  check_eq "$sh: in L, where nothing runs, 'tunnelgate down <Tab>' offers nothing" "" "$(complete "$sh" "$NS_L" "tunnelgate down ")"
  # Namespaces after --netns.
  check_match "$sh: 'tunnelgate up --netns <Tab>' offers the namespace $NS_C" "^$NS_C\$" \
    "$(complete "$sh" "$NS_C" "tunnelgate up --netns ")"
  check_eq "$sh: 'tunnelgate up --netns $NS_C<Tab>' offers only this run's namespace $NS_C" \
    "$NS_C" "$(complete "$sh" "$NS_C" "tunnelgate up --netns $NS_C")"
done

tg_run ip netns exec "$NS_C" "$TG" down tgcomp
check_rc "tunnelgate down tgcomp" 0
check_eq "with tgcomp stopped, bash offers no running tunnel in C" "" "$(complete bash "$NS_C" "tunnelgate down ")"
tg_summary
