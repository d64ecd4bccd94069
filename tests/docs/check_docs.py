#!/usr/bin/env python3
"""Checks that the documents say what the project is.

    check_docs.py SOURCE_ROOT BUILD_ROOT RR_INFO

- The settings tables (README.md's short one, docs/settings.md's full one)
  name exactly the RR_* variables the engine reads: the ones rr-info reports
  (`rr-info --json`) and the ones lib/ looks up by name.
- Every relative link in the documents points at a file that exists, and a
  link's #anchor at one of that file's headings.
- Every repository path the documents name (`lib/...`, `scripts/...`,
  `build/...`) exists, in the source tree or in this build.
- Every section of bench/RESULTS.md a source comment cites by name
  (`bench/RESULTS.md, "Delayed links"`) is a heading there.
"""

import json
import pathlib
import re
import subprocess
import sys

DOCUMENTS = ["README.md", "docs/*.md", "bench/README.md", "bench/RESULTS.md", "examples/README.md"]
TOP_DIRS = ("lib", "include", "kernels", "bench", "tests", "tools", "python", "scripts", "examples", "docs")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path: pathlib.Path) -> list[str]:
    """The text of every heading in a markdown file, code blocks left out."""
    body = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"^#+ (.*)$", body, flags=re.M)


def table_variables(text: str, heading: str) -> set[str]:
    """RR_* names in the first column of the first table under `heading`."""
    start = text.index(heading)
    names: set[str] = set()
    in_table = False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            in_table = True
            names.update(re.findall(r"`(RR_[A-Z0-9_]+)`", line.split("|")[1]))
        elif in_table:
            break
    return names


def table_defaults(text: str, heading: str) -> dict[str, str]:
    """Each RR_* name in the first column of the first table under `heading`: its row's second cell."""
    start = text.index(heading)
    cells: dict[str, str] = {}
    in_table = False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            in_table = True
            columns = line.split("|")
            for name in re.findall(r"`(RR_[A-Z0-9_]+)`", columns[1]):
                cells[name] = columns[2].strip()
        elif in_table:
            break
    return cells


def main() -> int:
    root, build, rr_info = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve(), sys.argv[3]
    problems: list[str] = []

    # 1. Settings.
    info = json.loads(subprocess.run([rr_info, "--json"], check=True, capture_output=True, text=True).stdout)
    reported = {v["variable"] for v in info["settings"]["variables"]}
    looked_up: set[str] = set()
    for src in list((root / "lib").rglob("*.cpp")) + list((root / "lib").rglob("*.hpp")):
        looked_up.update(re.findall(r'"(RR_[A-Z0-9_]+)"', src.read_text()))
    engine = reported | looked_up
    for name in sorted(looked_up - reported):
        problems.append(f"lib/ reads {name}, which rr-info does not report")
    tables = {"README.md": table_variables((root / "README.md").read_text(), "## Settings"),
              "docs/settings.md": table_variables((root / "docs/settings.md").read_text(), "| variable")}
    # Each default as the engine's settings table (lib/comm/settings_table.cpp) has it.
    defaults = {row["variable"]: row["default"] for row in info["settings"]["defaults"]}
    for doc, heading in (("README.md", "## Settings"), ("docs/settings.md", "| variable")):
        cells = table_defaults((root / doc).read_text(), heading)
        for name, default in sorted(defaults.items()):
            if name in cells and default not in cells[name]:
                problems.append(f"{doc}'s settings table gives {name} the default {cells[name]!r}; "
                                f"the engine's table says {default!r}")
    for doc, names in tables.items():
        for name in sorted(names - engine):
            problems.append(f"{doc}'s settings table names {name}, which the engine does not read")
        for name in sorted(engine - names):
            problems.append(f"the engine reads {name}, which {doc}'s settings table does not name")

    # 2. Links and 3. paths.
    docs = sorted({p for pattern in DOCUMENTS for p in root.glob(pattern)})
    anchors = {}
    for doc in docs:
        text = doc.read_text()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(root)}: link {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
                continue
            if anchor and dest.suffix == ".md":
                if dest not in anchors:
                    anchors[dest] = {slug(h) for h in headings(dest)}
                if anchor not in anchors[dest]:
                    problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(root)}")
        path_re = r"(?<![\w./-])((?:build|%s)/[\w./+-]*[\w/])(\.?[{*<$]?)" % "|".join(TOP_DIRS)
        for token, after in re.findall(path_re, text):
            if after.endswith(("{", "*", "<", "$")):
                continue  # a pattern: net{2,4}-..., idle_progress.{hpp,cpp}
            # build/X is in this build; a source path may also name what the
            # build makes from it (tests/soak/soak_rank, include/.../version.h).
            candidates = [build / token[len("build/"):]] if token.startswith("build/") else [root / token, build / token]
            if not any(c.exists() for c in candidates):
                problems.append(f"{doc.relative_to(root)}: names {token}, which does not exist")

    # 4. Code comments cite bench/RESULTS.md by section name: "..." must be a heading there.
    sections = {re.sub(r"\s+", " ", h).strip() for h in headings(root / "bench/RESULTS.md")}
    for folder in ("lib", "include", "kernels", "python", "tools", "bench", "tests", "scripts", "examples"):
        for src in (root / folder).rglob("*"):
            if not src.is_file() or src.suffix in (".md", ".json", ".png", ".csv") or src.name == "check_docs.py":
                continue
            try:
                text = src.read_text()
            except UnicodeDecodeError:
                continue
            joined = re.sub(r"\n\s*(?://+|#+)\s*", " ", text)  # comments wrapped over lines
            for name in re.findall(r'bench/RESULTS\.md[\s,(]*"([^"]+)"', joined):
                if re.sub(r"\s+", " ", name).strip() not in sections:
                    problems.append(f"{src.relative_to(root)} cites bench/RESULTS.md \"{name}\", which is no heading there")

    for p in problems:
        print(p)
    print(f"check_docs: {len(docs)} documents, {len(engine)} settings, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
