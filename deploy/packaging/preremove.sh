#!/bin/sh
# Before the package is removed: stop the daemon (an upgrade keeps it; the
# postinstall of the new version restarts it). The state in /var/lib/studio
# stays: remove it by hand if it is no longer wanted.
set -e
case "$1" in
  upgrade|1) exit 0 ;; # deb's upgrade; rpm's "1" is an upgrade too
esac
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now studio >/dev/null 2>&1 || true
fi
