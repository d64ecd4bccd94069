#!/usr/bin/env python3
"""The layers of lib/ as docs/design.md's table "The layers in lib/" states them.

    layers.py DESIGN_MD VIEWS_DIR SOURCE_ROOT

The build (lib/meson.build) runs it at configure time. For each layer it
makes VIEWS_DIR/<layer>/, holding a link to its own folder and to each folder
it may reach (the layers it uses, theirs, and so on): that folder is the
layer's only include root, so an include that points up the table, or into
a layer not below it, does not compile. It prints one line per layer, lower
layers first: "<layer>:<used>,<used>" (the layers it uses directly), which
the build turns into one static library per layer linked to those below.

tests/structure/check_layers.py reads the same table with allowed_uses(),
to check each include against the layers a file's own layer uses directly.
"""

import os
import pathlib
import re
import sys


def allowed_uses(design: str) -> dict[str, set[str]]:
    """Each layer's allowed includes, from docs/design.md's table and its kernels/ sentence."""
    section = design.split("## The layers in lib/", 1)[1].split("\n## ", 1)[0]
    uses: dict[str, set[str]] = {}
    for row in re.findall(r"^\| `(\w+)/` \|.*\| (.*) \|$", section, flags=re.M):
        layer, used = row
        uses[layer] = set(re.findall(r"`(\w+)`", used))
    kernels = re.search(r"`kernels/` sits beside `memory/`:\s+it\s+includes\s+only\s+(.*?),\s+and", section, flags=re.S)
    if not uses or kernels is None:
        sys.exit("layers: docs/design.md's layer table (or its kernels/ sentence) is not where it was")
    uses["kernels"] = set(re.findall(r"`(\w+)/`", kernels.group(1)))
    return uses


def reach(uses: dict[str, set[str]], layer: str) -> set[str]:
    """The layers `layer` may reach: those it uses, theirs, and so on."""
    seen: set[str] = set()
    todo = list(uses[layer])
    while todo:
        used = todo.pop()
        if used not in uses:
            sys.exit(f"layers: {layer}/ uses {used}/, which docs/design.md's table does not list")
        if used not in seen:
            seen.add(used)
            todo.extend(uses[used])
    return seen


def lower_first(uses: dict[str, set[str]]) -> list[str]:
    """The layers ordered so that each comes after every layer it uses."""
    order: list[str] = []
    while len(order) < len(uses):
        ready = sorted(l for l in uses if l not in order and uses[l] <= set(order))
        if not ready:
            sys.exit("layers: docs/design.md's table has a cycle")
        order.extend(ready)
    return order


def main() -> int:
    design, views, root = (pathlib.Path(a) for a in sys.argv[1:4])
    uses = allowed_uses(design.read_text())
    for layer in lower_first(uses):
        view = views / layer
        view.mkdir(parents=True, exist_ok=True)
        wanted = {layer} | reach(uses, layer)
        for entry in view.iterdir():  # a layer that left the table, or a use that did
            if entry.name not in wanted:
                entry.unlink()
        for name in sorted(wanted):
            target = root / ("kernels" if name == "kernels" else os.path.join("lib", name))
            link = view / name
            if link.is_symlink() and os.readlink(link) == str(target):
                continue
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target, target_is_directory=True)
        print(f"{layer}:{','.join(sorted(uses[layer]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
