#!/usr/bin/env python3
"""Builds only what the named tests need in a configured Meson build folder.

    scripts/build-for-tests.py BUILD_DIR [--suite S ...] [NAME ...]

For the sanitizer builds of .ci/run: `ninja` there would build every tool,
benchmark and example too, which no sanitizer test runs. The targets are the
tests' own dependencies as Meson records them (`meson introspect --tests`);
run the tests afterwards with `meson test --no-rebuild`.
"""

import argparse
import json
import os
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--suite", action="append", default=[], help="every test of this suite")
    parser.add_argument("names", nargs="*", help="tests by name")
    args = parser.parse_intermixed_args()

    def introspect(what: str):
        out = subprocess.run(["meson", "introspect", args.build_dir, what], check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)

    # A folder configured before the sources changed (a meson.build that now
    # adds a test) is configured again first: the introspection is what it records.
    regenerated = subprocess.run(["ninja", "-C", args.build_dir, "build.ninja"])
    if regenerated.returncode != 0:
        return regenerated.returncode
    tests = introspect("--tests")
    chosen = [t for t in tests
              if t["name"] in args.names
              or any(s.split(":")[-1] in args.suite for s in t["suite"])]
    missing = set(args.names) - {t["name"] for t in chosen}
    if missing:
        print(f"build-for-tests: no test named {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    files = {t["id"]: t["filename"] for t in introspect("--targets")}
    # Meson records absolute file names; ninja knows its targets relative to the build folder.
    build_dir = os.path.abspath(args.build_dir)
    outputs = sorted({os.path.relpath(f, build_dir)
                      for t in chosen for dep in t["depends"] for f in files.get(dep, [])})
    print(f"build-for-tests: {len(chosen)} tests need {len(outputs)} targets")
    return subprocess.run(["ninja", "-C", args.build_dir] + outputs).returncode


if __name__ == "__main__":
    sys.exit(main())
