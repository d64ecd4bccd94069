#!/usr/bin/env python3
"""Checks that lib/'s and kernels/' includes point down the layer table.

    check_layers.py SOURCE_ROOT

docs/design.md's table "The layers in lib/" says, per layer, which layers it
uses; kernels/ includes only reduce/ and common/ (the paragraph under the
table). A file of a layer may include its own layer's headers, the public
header (ringreduce/...), the system's and the third parties' (<...>), and
the headers of the layers it uses; any other project include (an upward
one, or one into a layer not listed) fails, naming the file, the line and
the layers it may use. The table is read from the document (lib/layers.py,
which the build reads too, to give each layer an include root holding only
the layers below it), so the rule and its description cannot drift apart.
"""

import pathlib
import re
import sys

sys.dont_write_bytecode = True  # nothing written into lib/
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "lib"))
from layers import allowed_uses  # noqa: E402  (lib/layers.py: the build reads the table the same way)

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
PUBLIC = "ringreduce"


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    uses = allowed_uses((root / "docs" / "design.md").read_text())
    sources = [p for top in ("lib", "kernels") for p in sorted((root / top).rglob("*"))
               if p.suffix in (".hpp", ".cpp", ".h", ".cu", ".cuh")]
    wrong = []
    for path in sources:
        rel = path.relative_to(root)
        layer = rel.parts[1] if rel.parts[0] == "lib" else "kernels"
        if layer not in uses:
            if len(rel.parts) > 2:  # lib/meson.build and the like sit at lib/'s top
                wrong.append(f"{rel}: layer {layer}/ is not in docs/design.md's table")
            continue
        text = path.read_text()
        for match in INCLUDE.finditer(text):
            target = match.group(1).split("/")[0] if "/" in match.group(1) else layer
            if target in (layer, PUBLIC) or target in uses[layer]:
                continue
            line = text.count("\n", 0, match.start()) + 1
            may = ", ".join(sorted(uses[layer])) or "nothing"
            wrong.append(f'{rel}:{line}: includes "{match.group(1)}", but {layer}/ uses only {may} '
                         f"(docs/design.md, \"The layers in lib/\")")
    for line in wrong:
        print(line)
    print(f"check_layers: {len(sources)} files, {len(wrong)} includes against the layers")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
