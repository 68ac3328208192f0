#!/usr/bin/env bash
# Check one prerequisite of the Makefile and say, in one line, what to do if it is missing.
#   scripts/preflight.sh python PYTHON   Python 3.11+ at PYTHON
#   scripts/preflight.sh node            Node.js 20.19+ and npm (Vite 8 needs them)
#   scripts/preflight.sh java            Java 17+ (Spark 4 needs it)
set -uo pipefail

fail() { echo "onceover: $*" >&2; exit 1; }

case "${1:-}" in
python)
  python=${2:-python3}
  command -v "$python" >/dev/null 2>&1 ||
    fail "no Python at '$python'; install Python 3.11 or newer, or run make PYTHON=/path/to/python3.11"
  version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) ||
    fail "'$python' does not run as Python; run make PYTHON=/path/to/python3.11"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    fail "Python 3.11 or newer is needed, '$python' is Python $version; install it or run make PYTHON=/path/to/python3.11"
  ;;
node)
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    fail "Node.js 20.19+ with npm is needed to build the dashboard; install it (e.g. apt-get install nodejs npm)"
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
    fail "Node.js 20.19 or newer is needed to build the dashboard, this is $(node --version); upgrade Node.js"
  ;;
java)
  java=java
  [ -n "${JAVA_HOME:-}" ] && java="$JAVA_HOME/bin/java"
  command -v "$java" >/dev/null 2>&1 ||
    fail "Java 17 or newer is needed to run Spark, but there is no '$java'; install a JDK 17+ (e.g. apt-get install openjdk-17-jre-headless)"
  major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\.\{0,1\}\([0-9]*\).*/\1 \2/p' | head -1)
  set -- $major
  [ "${1:-0}" = 1 ] && set -- "${2:-0}"
  [ "${1:-0}" -ge 17 ] ||
    fail "Spark 4 needs Java 17 or newer, but $java is Java ${1:-unknown}; install a JDK 17+ and set JAVA_HOME to it"
  ;;
*)
  fail "usage: scripts/preflight.sh python PYTHON | node | java"
  ;;
esac
