#!/usr/bin/env bash
# The deployment tests validate docker-compose.yml with Debian's docker-compose (no
# Docker daemon needed for `docker-compose config`). Install it when missing and we
# may; otherwise say how.
set -euo pipefail
command -v docker-compose >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing docker-compose for the deployment tests (apt-get install docker-compose) ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
  exit 0
fi
echo "onceover: the deployment tests need docker-compose; install it (sudo apt-get install -y docker-compose)" >&2
exit 1
