#!/bin/sh
# unit tier: a test binary with 77 failed assertions must exit 1 (failed),
# not 77 (what CTest reports as not run). usage: exit_probe.sh PROBE
"$1" "[.exit-probe]" > /dev/null 2>&1
rc=$?
if [ "$rc" -ne 1 ]; then
  echo "the probe's 77 failed assertions exited $rc, not 1"
  exit 1
fi
echo "77 failed assertions: exit 1 (failed), as every failing test binary's"
