#!/usr/bin/env bash
# Makes the project's Python environment, reachable as .venv/ at the
# repository root, from the pins in python/requirements.lock (torch and its
# NVIDIA libraries are about 3 GB). Safe to run again.
#
# The environment lives outside the clone, in
#   ${RR_VENV_CACHE:-~/.cache/ringreduce}/venv-<first 16 hex digits of the lock's sha256>
# and .venv is a link to it, so that a fresh clone with the same lock file
# (CI's, a second worktree) links to it instead of installing again, and a
# changed lock file makes a new one. A .venv that is a real folder is the
# user's own: it is used as it is, after installing the pins into it.
#
# Needs Debian's python3-venv and python3-dev (scripts/setup-debian.sh
# installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

lock=python/requirements.lock
python=/usr/bin/python3

if [ -d .venv ] && [ ! -L .venv ]; then
  echo "setup-python: .venv is a folder of your own; installing $lock into it"
  .venv/bin/python -m pip install -q -r "$lock"
  exit 0
fi

key=$(sha256sum "$lock" | cut -c1-16)
cache=${RR_VENV_CACHE:-$HOME/.cache/ringreduce}
env_dir=$cache/venv-$key
if [ ! -f "$env_dir/.complete" ]; then
  echo "setup-python: making $env_dir from $lock (torch with NVIDIA's libraries: about 3 GB)"
  mkdir -p "$cache"
  # Built beside and moved into place whole, so that an interrupted install
  # is never taken for a finished one. A venv records its own path, so it is
  # made at the final path, under a lock against a second setup at once.
  exec 9>"$cache/venv-$key.lock"
  flock 9
  if [ ! -f "$env_dir/.complete" ]; then
    rm -rf "$env_dir"
    "$python" -m venv "$env_dir"
    "$env_dir/bin/python" -m pip install -q --upgrade pip
    "$env_dir/bin/python" -m pip install -q -r "$lock"
    cp "$lock" "$env_dir/.complete"
  fi
  exec 9>&-
fi
ln -sfn "$env_dir" .venv
echo "setup-python: .venv -> $env_dir ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
