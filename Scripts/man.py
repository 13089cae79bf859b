#!/usr/bin/env python3
"""Generates the man pages tunnelgate(8) and tunnelgate.json(5), so that they cannot drift from what
they describe:

  tunnelgate(8)       the hand-written sections of packaging/man/tunnelgate.8.in around the
                      SUBCOMMANDS section, which is `tunnelgate help SUB` of every subcommand that
                      `tunnelgate --help` lists, turned into roff
  tunnelgate.json(5)  docs/configuration.md turned into roff (every key table, the wg-quick mapping,
                      the examples), with packaging/man/tunnelgate.json.5.in's NAME, SYNOPSIS and
                      SEE ALSO around it

  Scripts/man.py --tunnelgate BIN [--configuration docs/configuration.md]
                 [--templates packaging/man] --output DIR
  Scripts/man.py --check-coverage PAGE.txt --tunnelgate BIN [--configuration FILE]

--check-coverage reads a rendered page (`groff -man -Tascii -P-cbou`) and prints every option of
`tunnelgate help SUB` (for tunnelgate.8) or every key of docs/configuration.md's tables (for
tunnelgate.json.5) that it does not contain; it exits 1 if one is missing. netns/tests/man-pages.sh
runs it.

Only the Markdown that docs/configuration.md uses is understood: headings, paragraphs, `-` lists,
tables, fenced code, `code`, **bold**, *emphasis* and [links](…).
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path


# --- roff ------------------------------------------------------------------------------------------

def escape(text):
    """Plain text for roff: backslashes, and a leading dot or quote that would start a request."""
    text = text.replace("\\", "\\e")
    # A hyphen in an option or a negative number is a minus sign (copy-pasteable as ASCII "-").
    text = re.sub(r"(?<![\w-])-(?=[\w-])", r"\\-", text)
    text = re.sub(r"(?<=\\-)-", r"\\-", text)
    return text


def line_safe(text):
    """A line that does not start with a control character."""
    if text.startswith((".", "'")):
        return "\\&" + text
    return text


def inline(md):
    """Markdown inline markup to roff: `code` bold, **bold**, *emphasis* italic, links as their text."""
    out = []
    pos = 0
    for m in re.finditer(r"`([^`]+)`", md):
        out.append(_inline_text(md[pos:m.start()]))
        out.append("\\fB" + escape(m.group(1)) + "\\fR")
        pos = m.end()
    out.append(_inline_text(md[pos:]))
    return "".join(out)


def _inline_text(md):
    # [text](target): the text, and the target when it is a file or page (not an anchor in this page).
    def link(m):
        text, target = m.group(1), m.group(2)
        if target.startswith("#"):
            return text
        return f"{text} ({target})"
    md = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", link, md)
    text = escape(md)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\\fI\1\\fR", text)
    return text


def paragraph(lines):
    return [".PP"] + [line_safe(inline(l.strip())) for l in lines]


# --- docs/configuration.md -> roff -----------------------------------------------------------------

def split_row(line):
    """The cells of a Markdown table row (pipes inside `code` are not used by the docs)."""
    cells = line.strip().strip("|").split("|")
    return [c.strip() for c in cells]


def table(rows):
    """A key table as tagged paragraphs: the first cell is the tag, the middle cells are labelled
    ("Type: …; default: …"), the last is the text."""
    header = [h.lower() for h in split_row(rows[0])]
    out = []
    for row in rows[2:]:
        cells = split_row(row)
        cells += [""] * (len(header) - len(cells))
        out.append(".TP")
        out.append(line_safe(inline(cells[0])))
        middle = [f"{header[i].capitalize()}: {inline(cells[i])}" for i in range(1, len(header) - 1) if cells[i]]
        body = inline(cells[-1])
        if middle:
            out.append(line_safe("; ".join(middle) + "."))
            out.append(".br")
        out.append(line_safe(body))
    return out


def markdown_to_roff(md):
    """Returns (title, roff lines). The first `# Title` is returned, not rendered."""
    lines = md.splitlines()
    out = []
    title = None
    i = 0
    para = []

    def flush():
        nonlocal para
        if para:
            out.extend(paragraph(para))
            para = []

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            i += 1
            out += [".PP", ".RS 4", ".nf"]
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line_safe(lines[i].replace("\\", "\\e")))
                i += 1
            out += [".fi", ".RE"]
            i += 1
            continue
        m = re.match(r"^(#{1,4}) (.*)$", line)
        if m:
            flush()
            level, text = len(m.group(1)), m.group(2)
            if level == 1 and title is None:
                title = text
            elif level <= 2:
                out.append('.SH "' + inline(text.upper()).replace('"', "") + '"')
            else:
                out.append('.SS "' + inline(text).replace('"', "") + '"')
            i += 1
            continue
        if line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            out.extend(table(rows))
            continue
        m = re.match(r"^(\s*)(- |\d+\. )(.*)$", line)
        if m and not para:
            # A list item and its continuation lines (indented).
            bullet = "\\(bu" if m.group(2) == "- " else m.group(2).strip()
            item = [m.group(3)]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and not re.match(r"^\s*(- |\d+\. )", lines[i]):
                item.append(lines[i])
                i += 1
            out.append(f".IP {bullet} 4")
            out.extend(line_safe(inline(l.strip())) for l in item)
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        para.append(line)
        i += 1
    flush()
    return title, out


def configuration_keys(md):
    """Every key that a table of docs/configuration.md lists (its first column), in order."""
    keys = []
    in_code = False
    rows = []
    for line in md.splitlines() + [""]:
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("|"):
            rows.append(line)
            continue
        if rows:
            for row in rows[2:]:
                cell = split_row(row)[0]
                key = cell.replace("`", "").strip()
                if key:
                    keys.append(key)
            rows = []
    return keys


# --- tunnelgate help -> roff -----------------------------------------------------------------------

def run(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


def subcommands(binary):
    text = run(binary, "--help")
    names = []
    section = None
    for line in text.splitlines():
        if re.match(r"^[A-Z]+:", line):
            section = line.split(":")[0]
            continue
        m = re.match(r"^  ([a-z][a-z-]*)\s", line)
        if section == "SUBCOMMANDS" and m:
            names.append(m.group(1))
    return names


def global_options(binary):
    return parse_entries(run(binary, "--help"), "OPTIONS")


def parse_entries(text, section_name):
    """[(term, description)] of a help section such as OPTIONS: "  TERM   text" lines, continued by
    lines indented past the term."""
    entries = []
    section = None
    for line in text.splitlines():
        if re.match(r"^[A-Z]+:", line):
            section = line.split(":")[0]
            continue
        if section != section_name:
            continue
        if not line.strip():
            section = None
            continue
        m = re.match(r"^  (\S.*?)(?:\s{2,}(.*))?$", line)
        if m and not line.startswith("   "):
            entries.append([m.group(1), m.group(2) or ""])
        elif entries:
            entries[-1][1] += " " + line.strip()
    return entries


def help_blocks(text):
    """A subcommand's help: overview, usage, ARGUMENTS and OPTIONS entries, then the free paragraphs."""
    overview = usage = ""
    arguments, options = parse_entries(text, "ARGUMENTS"), parse_entries(text, "OPTIONS")
    paragraphs = []
    section = None
    current = []
    for line in text.splitlines():
        m = re.match(r"^([A-Z]+):\s*(.*)$", line)
        if m and m.group(1) in ("OVERVIEW", "USAGE", "ARGUMENTS", "OPTIONS"):
            section = m.group(1)
            if section == "OVERVIEW":
                overview = m.group(2)
            elif section == "USAGE":
                usage = m.group(2)
            continue
        if not line.strip():
            if current:
                paragraphs.append(current)
                current = []
            section = None
            continue
        if section is None:
            current.append(line)
    if current:
        paragraphs.append(current)
    return overview, usage, arguments, options, paragraphs


def option_terms(entries):
    """The option words of OPTIONS entries: "-h, --help" gives -h and --help."""
    terms = []
    for term, _ in entries:
        for word in re.split(r",\s*", term):
            terms.append(word.split()[0])
    return terms


def usage_roff(usage):
    """USAGE text to a synopsis: the command words bold, the rest as printed."""
    out = []
    for alternative in [u.strip() for u in usage.split("  |  ")]:
        words = alternative.split()
        bold = []
        while words and re.match(r"^[a-z][a-z-]*$", words[0]):
            bold.append(words.pop(0))
        out.append(".br")
        out.append(line_safe("\\fB" + " ".join(bold) + "\\fR " + escape(" ".join(words))))
    return out[1:]


def entries_roff(entries):
    out = []
    for term, description in entries:
        out.append(".TP")
        words = re.split(r"(,\s*)", term)
        out.append(line_safe("".join(
            w if re.match(r",\s*", w) else
            re.sub(r"^(\S+)(.*)$", lambda m: "\\fB" + escape(m.group(1)) + "\\fR" + ("\\fI" + escape(m.group(2)) + "\\fR" if m.group(2) else ""), w)
            for w in words)))
        out.append(line_safe(inline(description)))
    return out


def tunnelgate_page(binary, template):
    version = run(binary, "--version").strip()
    names = subcommands(binary)
    helps = {n: run(binary, "help", n) for n in names}
    blocks = {n: help_blocks(helps[n]) for n in names}
    # The last paragraph every subcommand's help ends with is said once, after them.
    last = {tuple(b[4][-1]) for b in blocks.values() if b[4]}
    shared = list(last.pop()) if len(last) == 1 else None

    synopsis = []
    for n in names:
        synopsis += usage_roff(blocks[n][1]) + [".br"]
    synopsis += [line_safe("\\fBtunnelgate\\fR \\-\\-help | \\-\\-version")]

    body = []
    for n in names:
        overview, usage, arguments, options, paragraphs = blocks[n]
        if shared and paragraphs and paragraphs[-1] == shared:
            paragraphs = paragraphs[:-1]
        body.append(f'.SS "{n}"')
        body += usage_roff(usage)
        body += paragraph([overview])
        body += entries_roff(arguments)
        body += entries_roff(options)
        for p in paragraphs:
            body += paragraph([" ".join(l.strip() for l in p)])
    if shared:
        body += paragraph([" ".join(l.strip() for l in shared)])

    return fill(template, version, {"@SYNOPSIS@": synopsis, "@GLOBAL_OPTIONS@": entries_roff(global_options(binary)),
                                    "@SUBCOMMANDS@": body})


def configuration_page(binary, configuration, template):
    version = run(binary, "--version").strip()
    _, body = markdown_to_roff(configuration.read_text())
    return fill(template, version, {"@CONFIGURATION@": body})


def fill(template, version, blocks):
    """The template with each line that is a placeholder replaced by its block, @VERSION@ by the
    version, and every character outside ASCII as a roff escape (any formatter reads it)."""
    out = []
    for line in template.read_text().splitlines():
        if line in blocks:
            out.extend(blocks[line])
        else:
            out.append(line.replace("@VERSION@", version))
    text = "\n".join(out) + "\n"
    return "".join(c if ord(c) < 128 else ROFF_GLYPHS.get(c, f"\\[u{ord(c):04X}]") for c in text)


# Characters the help texts use that every output device has a glyph for by these names (-Tascii has
# none for U+2026 and warns, in the middle of the rendered text).
ROFF_GLYPHS = {"…": "\\&...", "—": "\\(em", "–": "\\(en", "→": "\\(->", "’": "\\(cq", "‘": "\\(oq",
               "“": "\\(lq", "”": "\\(rq", "×": "\\(mu", "≥": "\\(>=", "≤": "\\(<="}


# --- coverage ----------------------------------------------------------------------------------------

def sections(page_text):
    """{heading: text} of a rendered page: sections (no indent) and subsections (3 spaces)."""
    out = {}
    current = None
    for line in page_text.splitlines():
        if re.match(r"^(\S| {3}\S)", line) and not line.startswith("    "):
            current = line.strip()
            out.setdefault(current, "")
        elif current:
            out[current] += line + "\n"
    return out


def tags(text):
    """The tags of the tagged paragraphs (.TP, indent 7) of a rendered text: a tag of up to 6
    characters shares its line with the body, which starts at column 14; a longer one has the line to
    itself. A line can be read either way ("[Peer] PublicKey" or "[Peer]" and its body), so both are
    kept. (Paragraph lines, also at indent 7, come out as tags too; they only add.)"""
    found = []
    for line in text.splitlines():
        if not re.match(r"^ {7}\S", line):
            continue
        if len(line) > 14 and line[13] == " " and line[14] != " ":
            found.append(line[7:13].strip())
        found.append(line.strip())
    return found


def missing_from(page_text, binary, configuration):
    """What the rendered page lacks (groff -man -Tascii, no hyphenation): for tunnelgate(8) each
    subcommand's subsection and, as a tag in it, each option its help lists; for tunnelgate.json(5)
    each key of docs/configuration.md's tables as a tag, as many times as the docs list it."""
    missing = []
    if re.search(r"^TUNNELGATE\.JSON\(5\)", page_text, re.M):
        present = tags(page_text)
        wanted = configuration_keys(configuration.read_text())
        for key in dict.fromkeys(wanted):
            if present.count(key) < wanted.count(key):
                missing.append(f"key {key} (docs/configuration.md lists it {wanted.count(key)} times, "
                               f"the page has {present.count(key)})")
    else:
        parts = sections(page_text)

        def option_tagged(text, option):
            return any(re.match(rf"^{re.escape(option)}(?![\w-])", t) or
                       re.search(rf", {re.escape(option)}(?![\w-])", t) for t in tags(text))
        for n in subcommands(binary):
            if n not in parts:
                missing.append(f"subcommand {n} (its subsection)")
                continue
            for option in option_terms(parse_entries(run(binary, "help", n), "OPTIONS")):
                if not option_tagged(parts[n], option):
                    missing.append(f"option {option} of `tunnelgate help {n}`")
        for option in option_terms(global_options(binary)):
            if not option_tagged(parts.get("OPTIONS", ""), option):
                missing.append(f"option {option} of `tunnelgate --help`")
    return missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tunnelgate", required=True)
    ap.add_argument("--configuration", default="docs/configuration.md", type=Path)
    ap.add_argument("--templates", default="packaging/man", type=Path)
    ap.add_argument("--output", type=Path)
    ap.add_argument("--check-coverage", type=Path, metavar="PAGE_TEXT")
    args = ap.parse_args()
    if args.check_coverage:
        missing = missing_from(args.check_coverage.read_text(), args.tunnelgate, args.configuration)
        for m in missing:
            print(f"missing: {m}")
        return 1 if missing else 0
    if not args.output:
        ap.error("--output DIR is required")
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "tunnelgate.8").write_text(tunnelgate_page(args.tunnelgate, args.templates / "tunnelgate.8.in"))
    (args.output / "tunnelgate.json.5").write_text(
        configuration_page(args.tunnelgate, args.configuration, args.templates / "tunnelgate.json.5.in"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
