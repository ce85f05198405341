#!/usr/bin/env bash
# show_rank.sh PROGRAM [ARGS...]: prints where mpirun placed this rank (rank and world size,
# local rank and local world size as Open MPI sets them, the network namespace, i.e. the lab
# "node", and its address), then becomes PROGRAM. tests/multinode/two_nodes.sh starts each rank
# through it to check that every node holds exactly one rank, with local rank 0.
set -euo pipefail
ns=$(ip netns identify $$ 2>/dev/null || true)
addr=$(ip -o -4 addr show dev eth0 2>/dev/null | awk '{print $4}' || true)
echo "placement: rank ${OMPI_COMM_WORLD_RANK:-?} of ${OMPI_COMM_WORLD_SIZE:-?}," \
  "local rank ${OMPI_COMM_WORLD_LOCAL_RANK:-?} of ${OMPI_COMM_WORLD_LOCAL_SIZE:-?}," \
  "namespace ${ns:-none}, eth0 ${addr:-none}"
exec "$@"
