#!/bin/bash
# The rootless tier may say "not run" only for a named setting of the
# machine that forbids unprivileged user namespaces; a lanes that cannot
# enter its world for any other reason must fail it. Given a lanes whose
# `features` fails with a made-up error, the tier must exit 1 where the
# machine allows user namespaces, and 77 (with the setting named) only
# where a setting forbids them.
# usage: rootless_refusal.sh ROOTLESS_TIER SOURCE_DIR
set -u
TIER=$1
SRC=$2
dir=$(mktemp -d /tmp/lanes-refusal-XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
cat >"$dir/lanes" <<'FAKE'
#!/bin/sh
echo "lanes: could not enter lanes' world: a made-up failure" >&2
exit 1
FAKE
chmod 755 "$dir/lanes"
out=$("$TIER" "$dir/lanes" "$SRC" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
forbidden=""
for f in kernel/apparmor_restrict_unprivileged_userns=1 kernel/unprivileged_userns_clone=0 user/max_user_namespaces=0; do
  if [ "$(cat "/proc/sys/${f%=*}" 2>/dev/null)" = "${f#*=}" ]; then forbidden=$f; break; fi
done
# a setting that is set but does not stop this user (AppArmor's restriction
# spares a profile that allows it) forbids nothing: the tier must fail then
if [ -n "$forbidden" ] && runuser -u nobody -- unshare -Ur true 2>/dev/null; then forbidden=""; fi
if [ -n "$forbidden" ]; then
  # this machine forbids them: the tier's not run must name the setting
  [ "$rc" -eq 77 ] && echo "$out" | grep -q "NOT RUN: .*$(echo "${forbidden%=*}" | tr / .)" && exit 0
  echo "FAILED: this machine forbids user namespaces ($forbidden): expected exit 77 naming it, got $rc"
  exit 1
fi
if [ "$rc" -eq 1 ] && echo "$out" | grep -q "a made-up failure"; then
  echo "ok: a lanes that cannot enter its world fails the tier (exit 1), with its error"
  exit 0
fi
echo "FAILED: expected exit 1 with lanes' error, got $rc (77 would read as not run)"
exit 1
