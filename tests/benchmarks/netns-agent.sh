#!/usr/bin/env bash
# mpirun's launch agent (--mca plm_rsh_agent) for "hosts" that are network
# namespaces (tests/runtime/multihost/netns-lib.sh): called as `agent HOST COMMAND…`,
# it runs COMMAND in the namespace whose eth0 address is HOST, as that host
# (COLL_HOSTID). COLL_NETNS_TAG names the namespaces.
host=$1
shift
h=$((${host##*.} - 1))
: "${COLL_NETNS_TAG:?}"
# Open MPI names its shared-memory files by host name, which the namespaces
# share: give this host's its own folder.
dir="${TMPDIR:-/tmp}/${COLL_NETNS_TAG}-h$h"
mkdir -p "$dir"
exec ip netns exec "${COLL_NETNS_TAG}h$h" env COLL_HOSTID="host$h" \
  OMPI_MCA_btl_vader_backing_directory="$dir" /bin/sh -c "$*"
