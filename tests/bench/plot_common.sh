# Sourced by the bench/plot tests (rr_bench_plot_test.sh, rr_sim_plot_test.sh):
# exits 77 (meson's skip) without Debian's matplotlib; otherwise gives them a
# scratch folder $TMP (removed at exit), whose "out" file holds the last
# command's output, fail MESSAGE (prints it and that output, sets $failed)
# and is_png FILE.
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "SKIP: no matplotlib for /usr/bin/python3 (apt-get install python3-matplotlib)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $1"; sed 's/^/  | /' "$TMP/out"; failed=1; }
is_png() { [[ -s $1 && $(head -c 8 "$1" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; }
