#!/usr/bin/env bash
# multihost-bench.sh BUILD_DIR [coll-vs-mpi options]
#
# A benchmark, not a test (docs/performance/multihost.md): 2 hosts x 2 ranks, hosts
# being network namespaces joined by veth pairs and a bridge
# (tests/runtime/multihost/netns-lib.sh). One mpirun job across them runs
# coll-vs-mpi, which times Coll (UCX between hosts, shared memory inside)
# against Open MPI (TCP between hosts, shared memory inside) on the same
# buffers: once with flat algorithms (ring allreduce, all-pairs alltoall),
# once with hierarchical ones. Needs root.
set -u
build=$(cd "${1:?usage: multihost-bench.sh BUILD_DIR [options]}" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../runtime/multihost/netns-lib.sh
. "$here/../runtime/multihost/netns-lib.sh"
tag="collb$$"
work=$(mktemp -d)
trap 'netns_remove "$tag" 2; rm -rf "$work" "${TMPDIR:-/tmp}/$tag"-h*' EXIT
why=$(netns_make "$tag" 2) || { echo "multihost-bench: $why" >&2; exit 1; }
export COLL_NETNS_TAG=$tag OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf 'allreduce * * allreduce_ring\nalltoall * * alltoall_allpairs\n' >"$work/flat.tuning"
printf 'allreduce * * allreduce_hierarchical\nalltoall * * alltoall_hierarchical\n' \
  >"$work/hierarchical.tuning"
for variant in flat hierarchical; do
  echo "# $variant: $(tr '\n' ';' <"$work/$variant.tuning")"
  ip netns exec "${tag}h0" env COLL_HOSTID=host0 COLL_TUNING_FILE="$work/$variant.tuning" \
    mpirun -H 10.77.0.1:2,10.77.0.2:2 -np 4 --mca plm_rsh_agent "$here/netns-agent.sh" \
    --mca oob_tcp_if_include eth0 --mca btl tcp,self,vader --mca btl_tcp_if_include eth0 \
    --mca btl_vader_single_copy_mechanism none \
    -x COLL_TUNING_FILE -x UCX_NET_DEVICES=eth0 -x COLL_SOCKET_IFNAME=eth0 \
    "$build/bin/coll-vs-mpi" --op allreduce,alltoall "$@"
done
