#!/bin/sh
# scenario tier: runs one shipped scenario with lanes, as a user would.
# usage: run_scenario.sh LANES FILE OUT_DIR
# Without root it is reported as not run (exit 77), never as passed.
if [ "$(id -u)" -ne 0 ]; then
  echo "not run: lanes run needs root"
  exit 77
fi
exec "$1" run "$2" --out "$3"
