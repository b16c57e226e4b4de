#!/bin/sh
# scenario tier: runs one shipped scenario with lanes, as a user would.
# usage: run_scenario.sh LANES FILE OUT_DIR [DEADLINE]
# Without root it is reported as not run (exit 77), never as passed; so is
# a scenario that needs what this kernel lacks (lanes run exits 3).
if [ "$(id -u)" -ne 0 ]; then
  echo "not run: the scenario tier runs as root (without root lanes has no BPF: the bpf egress modes fall back to ecmp and impairments are refused; the rootless tier covers lanes without root)"
  exit 77
fi
# lanes' own deadline (DEADLINE, 13m by default) comes before CTest's
# timeout (15 min, the 2 min between for tearing a fleet down): a scenario
# that hangs is stopped by lanes, reported failed by name with its results
# written, and torn down; CTest's kill is the last resort
"$1" run "$2" --out "$3" --deadline "${4:-13m}"
rc=$?
# 3: not run, as the scenario said (this kernel lacks what it needs)
[ "$rc" -eq 3 ] && exit 77
exit "$rc"
