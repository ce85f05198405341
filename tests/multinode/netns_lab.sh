# netns_lab.sh: "nodes" made of Linux network namespaces on one machine, for chapter 6's
# multi-node runs (tests/multinode/two_nodes.sh, tests/bench/ring_cost_model.sh source this).
#
# Each node is a namespace with one interface, eth0, on a private /24; the nodes' cables (veth
# pairs) end in a switch: a bridge in a namespace of its own. Nothing is created in, or
# routed to, the machine's own namespace: the nodes see each other and nothing else.
#
#     node 1 (LAB_NS[1])  eth0 10.77.6.1/24 --veth-- p1 \
#                                                        br0   (switch namespace LAB_SWITCH)
#     node 2 (LAB_NS[2])  eth0 10.77.6.2/24 --veth-- p2 /
#
# Names carry this shell's pid (lockstep-<pid>-n1, ...), so that two runs at once (two build
# folders) do not collide, and a lab whose shell is gone (killed by a timeout before its trap
# could run) is recognised and removed by the next lab_up. The namespace names are also the
# nodes' host names for mpirun: tools/netns-rsh maps them back to namespaces.
#
# Functions (all need root, or CAP_NET_ADMIN and CAP_SYS_ADMIN):
#   lab_can_run          exit 77 (CTest's skip) with a reason where namespaces cannot be made
#   lab_up N             make N nodes and the switch; sets LAB_NS[1..N], LAB_ADDR[1..N], LAB_HOSTS
#   lab_shape RATE       limit every node's outgoing traffic to RATE (tc tbf, e.g. 1gbit)
#   lab_mpirun_command N LAB_CMD=(mpirun started in node 1, N ranks, one per node, TCP only)
#   lab_tx_bytes I       bytes node I has sent on eth0
#   lab_down             end the processes left in the lab's namespaces and delete them
# This file is sourced; the caller owns `set -euo pipefail` and the EXIT trap that calls lab_down.

LAB_NET=${LOCKSTEP_LAB_NET:-10.77.6}  # the /24 the nodes share (inside the lab's namespaces only)
LAB_PREFIX=lockstep-$$
LAB_SWITCH=$LAB_PREFIX-sw
LAB_NODES=0
LAB_NS=()
LAB_ADDR=()
LAB_HOSTS=""
LAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB_AGENT=$LAB_ROOT/tools/netns-rsh
LAB_MPIRUN=${LAB_MPIRUN:-mpirun}

lab_skip() {
  echo "SKIP: $*" >&2
  exit 77
}

lab_can_run() {
  command -v ip >/dev/null || lab_skip "the 'ip' command is missing (Debian: apt-get install iproute2)"
  command -v "$LAB_MPIRUN" >/dev/null || lab_skip "no mpirun ('$LAB_MPIRUN'; Debian: apt-get install openmpi-bin)"
  local probe=$LAB_PREFIX-probe err
  if ! err=$(ip netns add "$probe" 2>&1); then
    lab_skip "cannot create a network namespace (needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN): $err"
  fi
  if ! err=$(ip netns exec "$probe" true 2>&1); then
    ip netns delete "$probe" 2>/dev/null || true
    lab_skip "cannot enter a network namespace with 'ip netns exec': $err"
  fi
  ip netns delete "$probe"
}

# Removes the namespaces of earlier labs whose shell no longer runs.
lab_sweep_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^lockstep-[0-9]+-(n[0-9]+|sw|probe)$' || true); do
    pid=${ns#lockstep-}
    pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "lab: removing $ns, left by a run (pid $pid) that ended without cleaning up" >&2
      lab_delete_ns "$ns"
    fi
  done
}

# Ends every process still inside namespace $1 (they can only be this lab's) and deletes it.
lab_delete_ns() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  if [[ -n $pids ]]; then
    kill -TERM $pids 2>/dev/null || true
    sleep 0.5
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  fi
  ip netns delete "$ns" 2>/dev/null || true
}

lab_down() {
  local i
  for ((i = 1; i <= LAB_NODES; i++)); do lab_delete_ns "${LAB_NS[i]}"; done
  lab_delete_ns "$LAB_SWITCH"  # deleting a namespace deletes its interfaces and their veth peers
  LAB_NODES=0
}

# Runs "$@", printing the command on failure: a lab step that fails names itself.
lab_step() {
  local err
  if ! err=$("$@" 2>&1); then
    echo "lab: '$*' failed: $err" >&2
    return 1
  fi
}

lab_up() {
  local nodes=$1 i
  lab_sweep_stale
  # Mark the lab as made before making it: a failure halfway still leaves lab_down its names.
  LAB_NODES=$nodes
  lab_step ip netns add "$LAB_SWITCH"
  lab_step ip -n "$LAB_SWITCH" link add br0 type bridge
  lab_step ip -n "$LAB_SWITCH" link set br0 up
  LAB_HOSTS=""
  for ((i = 1; i <= nodes; i++)); do
    LAB_NS[i]=$LAB_PREFIX-n$i
    LAB_ADDR[i]=$LAB_NET.$i
    lab_step ip netns add "${LAB_NS[i]}"
    # The cable: p<i> on the switch, eth0 in the node; made in the switch's namespace, so that
    # no interface ever exists in the machine's own.
    lab_step ip -n "$LAB_SWITCH" link add "p$i" type veth peer name eth0 netns "${LAB_NS[i]}"
    lab_step ip -n "$LAB_SWITCH" link set "p$i" master br0 up
    lab_step ip -n "${LAB_NS[i]}" addr add "${LAB_ADDR[i]}/24" dev eth0
    lab_step ip -n "${LAB_NS[i]}" link set eth0 up
    lab_step ip -n "${LAB_NS[i]}" link set lo up
    LAB_HOSTS+=${LAB_HOSTS:+,}${LAB_NS[i]}
  done
  # The bridge forwards once its ports leave the listening state (no STP: at once).
  for ((i = 2; i <= nodes; i++)); do lab_wait_reachable 1 "$i"; done
}

# Waits (up to 5 s) until node $1 reaches node $2 by TCP (a refused connection counts: the
# packets got there and back). No ping needed.
lab_wait_reachable() {
  local from=${LAB_NS[$1]} to=${LAB_ADDR[$2]} try out
  for try in $(seq 50); do
    # Port 9 (discard) has no listener: "refused" is the answer of a reachable node.
    out=$(ip netns exec "$from" timeout 1 bash -c "exec 3<>/dev/tcp/$to/9" 2>&1) && return 0
    [[ $out == *refused* ]] && return 0
    sleep 0.1
  done
  echo "lab: node $1 cannot reach node $2 ($to) through the switch" >&2
  return 1
}

# tc's token bucket on every node's eth0: each direction of each cable carries at most RATE.
# The bucket holds 32 KiB, so bursts pass at memory speed only for the first 32 KiB.
lab_shape() {
  local rate=$1 i
  for ((i = 1; i <= LAB_NODES; i++)); do
    lab_step ip netns exec "${LAB_NS[i]}" tc qdisc replace dev eth0 root tbf rate "$rate" burst 32kb latency 100ms
  done
}

lab_tx_bytes() { ip netns exec "${LAB_NS[$1]}" cat /sys/class/net/eth0/statistics/tx_bytes; }

# The command line of mpirun, started in node 1's namespace, with one rank on each of the first N
# nodes (--map-by node), every node reached through tools/netns-rsh (ssh's place), Open MPI's own
# traffic and the ranks' messages on the lab's /24, over TCP only: btl tcp,self (no vader, the
# shared-memory transport two ranks of one machine would otherwise use) and pml ob1 (not UCX,
# which brings shared memory of its own). No binding: every node's rank would bind to core 0 of
# the one machine. The environment (e.g. OMPI_ALLOW_RUN_AS_ROOT) reaches the ranks through
# netns-rsh. Sets the array LAB_CMD (a function could not run under `timeout`); append the
# program and its arguments.
lab_mpirun_command() {
  local ranks=$1 i hosts=""
  for ((i = 1; i <= ranks; i++)); do hosts+=${hosts:+,}${LAB_NS[i]}:1; done
  LAB_CMD=(ip netns exec "${LAB_NS[1]}" "$LAB_MPIRUN" -n "$ranks" --host "$hosts" --map-by node --bind-to none
    --mca plm rsh --mca plm_rsh_agent "$LAB_AGENT" --mca plm_rsh_no_tree_spawn 1
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$LAB_NET.0/24" --mca oob_tcp_if_include "$LAB_NET.0/24")
}
