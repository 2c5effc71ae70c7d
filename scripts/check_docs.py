#!/usr/bin/env python3
"""Fails when the user-facing docs name what the repository does not have.

  python3 scripts/check_docs.py [DINO_BINARY]      (from the repository root; default build/dino)

Reads README.md, docs/*.md and bench/README.md and prints one line per problem,
`check_docs: FILE:LINE: <what> does not exist`, then exits 1; exits 0 when there is none.
What it checks, and why each:
  - links: every relative link target (and #anchor, as GitHub makes a heading's anchor) must
    exist, since a moved file or a renamed section breaks a reader's click silently;
  - paths: a path whose first component is a top-level folder of the repository (in a
    backticked span, a sh block or the prose) must exist. Only tokens that end in an extension
    or a slash count (TensorBoard's tag train/loss is a name, not a path); build/ and runs/ are
    outputs, so they are not checked; a token with *, ?, [, $, <placeholder> or ..., or one the
    reader makes (my.ini, runs/mine/...), stands for paths and is skipped; each alternative of
    kernels/layer_norm.{h,cpp} is checked;
  - XDINO_ names: each must appear in a CMakeLists.txt, cmake/ file, .ci/run or a source or
    script file: a CMake option or environment variable that no code reads is a stale name;
  - flags: in `dino <subcommand> ... --flag` (one backticked span, or one command of a sh
    block), each flag must be one that `DINO_BINARY <subcommand> --help` lists. Flags after
    `dino launch ... --` belong to the subcommand that follows. Without the binary (a tree not
    yet built) this check is skipped with a warning, since --help is the one list of flags;
  - code names: a backticked `Name::member` or `function()` must be defined by the project's
    own sources (the member as a word after `Name::`, or inside a file that defines Name; a
    function as `function(`), since the docs describe our code, and a renamed function leaves
    them describing code that is gone. A dotted name (`torch.load()`, a peer's Python) is not
    ours and is not checked;
  - README.md holds at most README_WORDS words: past that, a first screen no longer says
    what the project is.
Standard library only: CI runs it before anything is installed.
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import unicodedata

TOP_LEVEL = ("core", "kernels", "augment", "train", "distributed", "models", "ssl", "eval",
             "launch", "tests", "bench", "docs", "scripts", "configs", "fuzz", "cmake", ".ci")
# The files read for XDINO_ names: every source, script and build file, besides every
# CMakeLists.txt, cmake/ and .ci/run; not the docs, whose mention proves nothing.
SOURCE_SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".sh", ".py", ".cmake", ".sbatch")
SKIP_DIRS = {".git", "runs"}  # and every build*/ folder: outputs
# The official code scripts/fetch_official.sh fetches is not ours: what it defines does not count.
NOT_OURS = {os.path.join("bench", "reference", "official"), os.path.join("bench", "official")}
CODE_SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".py", ".sh")
README_WORDS = 3000

problems = []


def problem(path, line, what):
    problems.append((path, line, f"check_docs: {path}:{line}: {what} does not exist"))


def doc_files():
    files = ["README.md"]
    files += sorted(os.path.join("docs", f) for f in os.listdir("docs") if f.endswith(".md"))
    files.append(os.path.join("bench", "README.md"))
    return [f for f in files if os.path.isfile(f)]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def blank(text, start, end):
    """text with [start, end) replaced by spaces, newlines kept (so offsets keep their line)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def split_fences(text):
    """(text without fenced blocks, [(language, first line number, [lines])])."""
    blocks, out, lines = [], [], text.split("\n")
    fence = None
    for number, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", line)
        if fence is None and m:
            fence = (m.group(1), m.group(2).lower(), number + 1, [])
            out.append("")
        elif fence is not None and line.strip().startswith(fence[0][:3]) and \
                line.strip().strip(fence[0][0]) == "":
            blocks.append((fence[1], fence[2], fence[3]))
            fence = None
            out.append("")
        elif fence is not None:
            fence[3].append(line)
            out.append("")
        else:
            out.append(line)
    return "\n".join(out), blocks


def code_spans(text):
    """[(offset of the content, content)] of the inline code spans of text (no fences in it)."""
    spans = []
    for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, re.S):
        if "\n\n" in m.group(2):
            continue
        spans.append((m.start(2), m.group(2)))
    return spans


# --- links and anchors -------------------------------------------------------------------

def github_slug(heading):
    """The anchor GitHub gives a heading (github-slugger): markup dropped, lower case,
    punctuation removed, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


anchor_cache = {}


def anchors_of(path):
    if path not in anchor_cache:
        prose, _ = split_fences(open(path, encoding="utf-8").read())
        seen, slugs = {}, set()
        for line in prose.split("\n"):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            slugs.add(slug if n == 0 else f"{slug}-{n}")
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", prose):
            slugs.add(m.group(1))
        anchor_cache[path] = slugs
    return anchor_cache[path]


def check_links(path, prose):
    base = os.path.dirname(path)
    targets = [(m.start(1), m.group(1)) for m in
               re.finditer(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)]
    targets += [(m.start(1), m.group(1)) for m in
                re.finditer(r"^\s*\[[^\]]+\]:\s*(\S+)", prose, re.M)]
    for offset, target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(base, file_part)) if file_part else path
        line = line_of(prose, offset)
        if not os.path.exists(resolved):
            problem(path, line, f"link target {target}")
        elif anchor and resolved.endswith(".md") and anchor not in anchors_of(resolved):
            problem(path, line, f"anchor #{anchor} in {os.path.relpath(resolved)}")


# --- repository paths --------------------------------------------------------------------

PATH_RE = re.compile(r"(?<![\w./$-])((?:%s)/(?:\{[^{}\s]*\}|[^\s`'\"(),;:\]|{}])*)"
                     % "|".join(re.escape(t) for t in TOP_LEVEL))


def expand_braces(token):
    m = re.search(r"\{([^{}]*,[^{}]*)\}", token)
    if not m:
        return [token]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(token[:m.start()] + alt + token[m.end():])
    return out


def is_pattern(token):
    """A token that stands for paths rather than naming one: a glob, a <placeholder>, an
    elision, or a file the reader makes (my.ini, runs/mine/...)."""
    return (any(c in token for c in "*<>?[$") or "..." in token or
            re.search(r"(^|/)my", token) is not None)


def line_in(path, offset0, lines, where):
    """The line of offset `where`: in the file's text, or in a sh command joined from lines
    [(offset in the command, line number)]."""
    if lines is None:
        return line_of(path_text[path], offset0 + where)
    return [number for start, number in lines if start <= where][-1]


def check_paths(path, text, offset0, lines=None):
    for m in PATH_RE.finditer(text):
        token = m.group(1).rstrip(".")
        if is_pattern(token) or not re.search(r"(/|\.[\w-]+|^\.ci/run)$", token):
            continue  # without an extension or a trailing slash, a name (TensorBoard's train/loss)
        line = line_in(path, offset0, lines, m.start())
        for candidate in expand_braces(token):
            if not os.path.exists(candidate):
                problem(path, line, f"path {candidate}")


# --- XDINO_ names ------------------------------------------------------------------------

def source_names():
    names = set()
    for root, dirs, files in os.walk("."):
        rel = os.path.relpath(root, ".")
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for f in files:
            full = os.path.join(rel, f) if rel != "." else f
            if not (f == "CMakeLists.txt" or f.endswith(SOURCE_SUFFIXES) or
                    full.startswith("cmake" + os.sep) or full == os.path.join(".ci", "run")):
                continue
            try:
                names.update(re.findall(r"XDINO_[A-Z0-9_]+", open(full, encoding="utf-8",
                                                                     errors="replace").read()))
            except OSError:
                pass
    return names


def check_names(path, text, known):
    for m in re.finditer(r"\bXDINO_[A-Z0-9_]*[A-Z0-9]\b(?![<*])", text):
        if m.group(0) not in known:
            problem(path, line_of(text, m.start()), f"name {m.group(0)}")


# --- code names ---------------------------------------------------------------------------

def source_texts():
    """{path: text} of the project's own code files."""
    texts = {}
    for root, dirs, files in os.walk("."):
        rel = os.path.relpath(root, ".")
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build") and
                   os.path.join(rel, d).lstrip("./") not in NOT_OURS and
                   os.path.normpath(os.path.join(rel, d)) not in NOT_OURS]
        for f in files:
            if f.endswith(CODE_SUFFIXES):
                full = os.path.normpath(os.path.join(rel, f))
                try:
                    texts[full] = open(full, encoding="utf-8", errors="replace").read()
                except OSError:
                    pass
    return texts


CODE_NAME_RE = re.compile(r"^(?:(\w+)::)?(\w+)(?:::(\w+))?(\(\))?$")


def defined(name, member, call, texts, cache={}):
    key = (name, member, call)
    if key not in cache:
        if name is None:  # function(): called or defined somewhere as `function(`
            pattern = re.compile(r"\b%s\s*\(" % re.escape(member))
            cache[key] = any(pattern.search(t) for t in texts.values())
        else:
            owner = re.compile(r"\b(?:class|struct|enum(?: class)?)\s+%s\b|"
                               r"\bnamespace\s+(?:\w+::)*%s\b|\b%s::"
                               % (re.escape(name), re.escape(name), re.escape(name)))
            word = re.compile(r"\b%s\b" % re.escape(member))
            cache[key] = any(owner.search(t) and word.search(t) for t in texts.values())
    return cache[key]


def check_code_names(path, spans, texts):
    for offset, content in spans:
        m = CODE_NAME_RE.match(content.strip())
        if not m:
            continue
        first, second, third, call = m.groups()
        if first is None and call is None:
            continue  # a bare word: a flag value, a file name, a key
        if first is not None and third is not None:  # A::B::c
            first, second = second, third
        if not defined(first, second, call, texts):
            problem(path, line_of(path_text[path], offset), f"code name {content.strip()}")


def check_readme_length():
    words = len(re.findall(r"\S+", open("README.md", encoding="utf-8").read()))
    if words > README_WORDS:
        problems.append(("README.md", 0, f"check_docs: README.md: {words} words, more than "
                         f"{README_WORDS}: move detail into docs/"))


# --- dino flags --------------------------------------------------------------------------

def read_flags(binary):
    """{subcommand: set of flags} from the binary's --help, or None without a binary."""
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        return None
    def run(*args):
        return subprocess.run([binary, *args], capture_output=True, text=True,
                              timeout=60).stdout
    top = run("--help")
    subcommands = re.findall(r"^  ([a-z_]+)\s", top.split("Subcommands:", 1)[-1], re.M)
    # Each --help starts LibTorch (about a second): a few at a time.
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        helps = list(pool.map(lambda sub: run(sub, "--help"), subcommands))
    flags = {}
    for sub, text in zip(subcommands, helps):
        # Every flag line, aliases included ("--nproc INT  same as --nproc_per_node").
        listed = set(re.findall(r"^  (--[\w-]+)", text, re.M))
        flags[sub] = listed | {"--config", "--variant", "--help"}
    return flags


def check_command(path, text, offset0, flags, lines=None):
    """Checks each `dino <subcommand> --flag` in text (one span, or one sh command)."""
    for segment in re.finditer(r"(?:[^;&|]|&(?!&)|\|(?=\S)|(?<=\S)\|)+", text):
        sub = None
        for tok in re.finditer(r"\S+", segment.group(0)):
            word = tok.group(0).strip("[](),.'\"")
            where = segment.start() + tok.start()
            if sub is None:
                if word == "dino" or word.endswith("/dino"):
                    sub = ""  # the next word names the subcommand
                continue
            if sub == "":
                sub = word if word in flags else None
                continue
            if word == "--":
                if sub != "launch":
                    sub = None
                else:
                    sub = "launch--"  # the next word names the launched subcommand
                continue
            if sub == "launch--" or (sub == "launch" and word in flags):
                sub = word if word in flags else None
                continue
            if re.match(r"^--[A-Za-z][\w-]*", word):
                name = word.split("=", 1)[0]
                if name not in flags[sub]:
                    problem(path, line_in(path, offset0, lines, where),
                            f"flag {name} of dino {sub}")


# --- the files ---------------------------------------------------------------------------

path_text = {}


def check_file(path, known_names, flags, texts):
    text = open(path, encoding="utf-8").read()
    prose, blocks = split_fences(text)
    path_text[path] = prose  # same lines as text: offsets into it give line numbers
    spans = code_spans(prose)
    linkable = prose
    for offset, content in spans:
        linkable = blank(linkable, offset - 1, offset + len(content) + 1)
    check_links(path, linkable)
    # Paths named in prose, outside code spans and link targets, count too.
    check_paths(path, re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group(0)), linkable), 0)
    check_names(path, text, known_names)
    check_code_names(path, spans, texts)
    for offset, content in spans:
        check_paths(path, content, offset)
        if flags is not None:
            check_command(path, content, offset, flags)
    for language, first, lines in blocks:
        if language not in ("sh", "bash", "shell", "console"):
            continue
        command, starts = "", []
        for number, line in enumerate(lines, first):
            line = re.sub(r"(^|\s)#.*$", "", line)  # a shell comment is prose
            starts.append((len(command), number))
            if line.rstrip().endswith("\\"):
                command += line.rstrip()[:-1] + " "
                continue
            command += line
            check_paths(path, command, 0, starts)
            if flags is not None:
                check_command(path, command, 0, flags, starts)
            command, starts = "", []


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "dino")
    if not os.path.isfile("README.md") or not os.path.isdir("docs"):
        print("check_docs: run it from the repository root", file=sys.stderr)
        return 2
    flags = read_flags(binary)
    if flags is None:
        print(f"check_docs: warning: {binary} is not an executable: flags not checked")
    known = source_names()
    texts = source_texts()
    files = doc_files()
    for path in files:
        check_file(path, known, flags, texts)
    check_readme_length()
    order = {path: n for n, path in enumerate(files)}
    for _, _, line in sorted(problems, key=lambda p: (order[p[0]], p[1])):
        print(line)
    if problems:
        return 1
    print(f"check_docs: {len(files)} files: links, paths, XDINO_ names, code names"
          + (", dino flags" if flags is not None else "") + " all exist; README.md within "
          f"{README_WORDS} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
