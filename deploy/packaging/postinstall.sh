#!/bin/sh
# After the package is installed or upgraded: systemd learns of the unit;
# a running daemon is restarted onto the new binary (migrations run at its
# start). A new install is left for the operator to enable.
set -e
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  if systemctl is-active --quiet studio; then
    systemctl restart studio || true
  fi
fi
