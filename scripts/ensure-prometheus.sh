#!/usr/bin/env bash
# The /metrics tests scrape the control plane with a real Prometheus server and check the
# shipped alert rules with its promtool (Debian's package, 2.42). Install it when missing
# and we may; otherwise say how. Debian's package would start a service: nothing here
# needs one (tests start their own server on a free port), so none is started.
set -euo pipefail
prometheus=${ONCEOVER_PROMETHEUS:-/usr/bin/prometheus}
[ -x "$prometheus" ] && [ -x "$(dirname "$prometheus")/promtool" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Prometheus for the metrics tests (apt-get install prometheus) ..."
  apt-get update -qq
  # policy-rc.d 101: no service started by the package's install scripts (one the
  # machine already has is left as it is).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  exit 0
fi
echo "onceover: the metrics tests need Prometheus at $prometheus (and promtool beside it); install it (sudo apt-get install -y prometheus) or set ONCEOVER_PROMETHEUS" >&2
exit 1
