#!/bin/sh
# matrix tier: the combination matrix (lanes matrix), run with lanes as a
# user would. usage: run_matrix.sh LANES OUT_DIR SEED
# Without root it is reported as not run (exit 77), never as passed.
if [ "$(id -u)" -ne 0 ]; then
  echo "not run: the matrix tier runs as root (the bpf egress modes need it)"
  exit 77
fi
"$1" matrix --seed "$3" --out "$2" || exit 1
"$1" run "$2/matrix.xml" --out "$2/results"
