# netns-lib.sh - "hosts" on one machine for multi-host tests and benchmarks.
#
#   netns_make TAG HOSTS     namespaces TAGh0..TAGh{HOSTS-1}, each with lo
#                            and eth0 = 10.77.0.(h+1)/24, joined by a bridge
#                            in namespace TAGsw; prints why and fails where
#                            namespaces cannot be made (not root, no veth)
#   netns_remove TAG HOSTS   deletes them (and with them the veth pairs)

# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"

netns_make() {
  local tag=$1 hosts=$2 h ns err
  [ "$(id -u)" = 0 ] || { echo "creating network namespaces needs root"; return 1; }
  command -v ip >/dev/null || { echo "no ip command (iproute2)"; return 1; }
  err=$(ip netns add "${tag}sw" 2>&1) || { echo "ip netns add failed: $err"; return 1; }
  err=$(ip -n "${tag}sw" link add br0 type bridge 2>&1) || { echo "no bridge device: $err"; return 1; }
  ip -n "${tag}sw" link set br0 up
  for h in $(seq 0 $((hosts - 1))); do
    ns="${tag}h$h"
    err=$(ip netns add "$ns" 2>&1) || { echo "ip netns add $ns failed: $err"; return 1; }
    ip -n "$ns" link set lo up
    # A veth pair: eth0 inside the host, p$h on the switch's bridge.
    err=$(ip link add "${tag}a$h" type veth peer name "${tag}b$h" 2>&1) ||
      { echo "no veth pairs: $err"; return 1; }
    ip link set "${tag}a$h" netns "$ns"
    ip link set "${tag}b$h" netns "${tag}sw"
    ip -n "$ns" link set "${tag}a$h" name eth0
    ip -n "${tag}sw" link set "${tag}b$h" name "p$h"
    ip -n "${tag}sw" link set "p$h" master br0 up
    ip -n "$ns" addr add "10.77.0.$((h + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  # Until every bridge port forwards (5 s at most).
  for i in $(seq 1 "$(scaled 50)"); do
    local ready=1
    for h in $(seq 0 $((hosts - 1))); do
      ip -n "${tag}sw" -d link show "p$h" | grep -q "state forwarding" || ready=0
    done
    [ "$ready" = 1 ] && return 0
    sleep 0.1
  done
  echo "the bridge's ports do not forward"
  return 1
}

netns_remove() {
  local tag=$1 hosts=$2 h
  for h in $(seq 0 $((hosts - 1))); do ip netns del "${tag}h$h" 2>/dev/null; done
  ip netns del "${tag}sw" 2>/dev/null
  return 0
}
