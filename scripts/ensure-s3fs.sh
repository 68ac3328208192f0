#!/usr/bin/env bash
# One ledger test mounts a bucket of the local S3 with s3fs-fuse, as users mount buckets
# (gcsfuse, DBFS, s3fs), to show the sink refusing a ledger there: such a mount has no
# hard links and no atomic renames. Install s3fs when missing and we may; otherwise say how.
set -euo pipefail
command -v s3fs >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing s3fs for the ledger's FUSE test (apt-get install s3fs) ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq s3fs >/dev/null
  exit 0
fi
echo "onceover: the ledger's FUSE test needs s3fs; install it (sudo apt-get install -y s3fs)" >&2
exit 1
