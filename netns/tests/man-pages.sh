#!/usr/bin/env bash
# man-pages: tunnelgate(8) and tunnelgate.json(5), as Scripts/man.py generates them for the package,
# render without a warning, and hold every subcommand and option that `tunnelgate help` prints and
# every key that docs/configuration.md's tables list; the check fails when one is missing (shown here
# by deleting an option from the page and a key from the docs it is made from).
#
#   $TG help SUB ──┐
#   docs/configuration.md ──► Scripts/man.py ──► tunnelgate.8, tunnelgate.json.5 ──► groff -Tascii
#   packaging/man/*.in ─────┘                                                         └─► coverage check
#
# No namespace is made; nothing outside $TG_TMP is written.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --tmp

man_py=$TG_ROOT/Scripts/man.py
docs=$TG_ROOT/docs/configuration.md
out=$TG_TMP/pages
version=$("$TG" --version)

# render PAGE: the page as plain text, without hyphenation and wide, as the coverage check reads it.
# Its warnings go to PAGE.warnings: mixed into the text they would cut entries in two.
render() { groff -man -Tascii -P-cbou -rHY=0 -rLL=150n "$1" 2>"$1.warnings"; }
# coverage PAGE [DOCS]: Scripts/man.py's check of the rendered PAGE against $TG and DOCS.
coverage() {
  render "$1" >"$1.txt"
  python3 "$man_py" --check-coverage "$1.txt" --tunnelgate "$TG" --configuration "${2:-$docs}"
}

tg_run python3 "$man_py" --tunnelgate "$TG" --configuration "$docs" --templates "$TG_ROOT/packaging/man" --output "$out"
check_rc "Scripts/man.py generates both pages" 0
for page in tunnelgate.8 tunnelgate.json.5; do
  tg_run groff -man -ww -z "$out/$page"
  check_eq "$page: groff -man -ww finds nothing to warn about" "" "$TG_OUT$TG_ERR"
  check_match "$page: its header carries tunnelgate --version ($version)" "^\\.TH .* \"tunnelgate $(tg_re "$version")\" " "$(cat "$out/$page")"
  tg_run lexgrog "$out/$page"
  check_match "$page: lexgrog reads its NAME line (what whatis and apropos index)" ': "tunnelgate(\.json)? - ' "$TG_OUT"
  tg_run coverage "$out/$page"
  check_eq "$page: groff -Tascii renders it without a warning (every glyph exists there)" "" "$(cat "$out/$page.warnings")"
  check_rc "$page: the coverage check passes" 0
  check_eq "$page: … and reports nothing missing" "" "$TG_OUT"
done

# What the check compares with, so a vacuous pass would show.
subcommands=$("$TG" --help | sed -n '/^SUBCOMMANDS:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
check_eq "tunnelgate --help lists the twelve subcommands the check walks" "validate plan up exec down status list message secret metrics on-demand help" \
  "$(printf '%s\n' "$subcommands" | tr '\n' ' ' | sed 's/ $//')"
rendered=$(cat "$out/tunnelgate.8.txt")
for sub in $subcommands; do
  for option in $("$TG" help "$sub" | sed -n '/^OPTIONS:/,/^$/s/^  \(-[-a-z]*\).*/\1/p'); do
    check_match "tunnelgate.8: the $sub subsection has $option as a tagged entry" "^       $(tg_re "$option")( |$)" \
      "$(printf '%s\n' "$rendered" | sed -n "/^   $sub\$/,/^   [a-z]/p")"
  done
done
keys=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import man; print(len(man.configuration_keys(open(sys.argv[2]).read())))' \
  "$TG_ROOT/Scripts" "$docs")
check_match "docs/configuration.md's tables list at least 50 keys for the check ($keys)" '^([5-9][0-9]|[1-9][0-9]{2,})$' "$keys"
check_match "tunnelgate.json.5 has the wg-quick mapping (the [Peer] PublicKey entry)" '^       \[Peer\] PublicKey$' \
  "$(cat "$out/tunnelgate.json.5.txt")"

# --- The check fails when something is missing --------------------------------------------------------
# An option deleted from tunnelgate(8): up's --detach entry.
python3 - "$out/tunnelgate.8" "$TG_TMP/no-detach.8" <<'EOF'
import re, sys
page = open(sys.argv[1]).read()
cut = re.sub(r"\.TP\n\\fB\\-\\-detach\\fR\n[^\n]*\n", "", page, count=1)
assert cut != page, "no --detach entry to delete"
open(sys.argv[2], "w").write(cut)
EOF
tg_run coverage "$TG_TMP/no-detach.8"
check_rc "tunnelgate.8 without up's --detach entry: the check fails" 1
check_eq "… naming it" "missing: option --detach of \`tunnelgate help up\`" "$TG_OUT"

# A key deleted from the docs the page is made from: the page then lacks it, and the check against the
# real docs says so.
grep -v '^| `listenPort` |' "$docs" >"$TG_TMP/configuration-without-listenPort.md"
check_eq "the docs copy lacks exactly one line (listenPort's row)" 1 \
  "$(( $(wc -l <"$docs") - $(wc -l <"$TG_TMP/configuration-without-listenPort.md") ))"
python3 "$man_py" --tunnelgate "$TG" --configuration "$TG_TMP/configuration-without-listenPort.md" \
  --templates "$TG_ROOT/packaging/man" --output "$TG_TMP/cut"
tg_run coverage "$TG_TMP/cut/tunnelgate.json.5"
check_rc "tunnelgate.json.5 made without listenPort's row: the check against docs/configuration.md fails" 1
check_match "… naming listenPort" '^missing: key listenPort ' "$TG_OUT"
check_eq "… and nothing else" 1 "$(printf '%s\n' "$TG_OUT" | grep -c .)"

tg_summary
