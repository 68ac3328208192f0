#!/usr/bin/env bash
# The dashboard tests drive Debian's Chromium (Playwright's own browser download does
# not work offline). Install it when missing and we may; otherwise say how.
set -euo pipefail
chromium=${ONCEOVER_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Chromium for the browser tests (apt-get install chromium) ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "onceover: the browser tests need Chromium at $chromium; install it (sudo apt-get install -y chromium) or set ONCEOVER_CHROMIUM" >&2
exit 1
