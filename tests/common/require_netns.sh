# Sourced by the tests that make namespaced hosts (tests/bench/rr_net_bench*,
# tests/fault/link_cut): exits 77 (meson's skip), saying why, unless this
# shell may create network namespaces and has ip and tc (iproute2).
[[ $(id -u) -eq 0 ]] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "SKIP: no ip/tc (iproute2)"; exit 77; }
netns_probe=rrprobe$$
ip netns add "$netns_probe" 2>/dev/null || { echo "SKIP: ip netns add is not allowed here"; exit 77; }
ip netns del "$netns_probe"
unset netns_probe
