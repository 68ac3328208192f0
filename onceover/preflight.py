"""Checks that the machine can run a command, each failing with one line to act on."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from onceover.errors import PortInUseError, PreflightError

MIN_PYTHON = (3, 11)
MIN_JAVA = 17


def check_python(version: tuple[int, ...] = sys.version_info[:3]) -> None:
    """Refuse a Python older than :data:`MIN_PYTHON`."""
    if version[:2] < MIN_PYTHON:
        found = ".".join(str(part) for part in version[:3])
        need = ".".join(str(part) for part in MIN_PYTHON)
        raise PreflightError(
            f"Python {need} or newer is needed, this is Python {found} ({sys.executable}); "
            f"install Python {need}+ and run `make` again (or set PYTHON=/path/to/python{need})"
        )


def check_port_free(host: str, port: int, option: str) -> None:
    """Raise :class:`PortInUseError` if ``host:port`` cannot be listened on (port 0 always can)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Servers set SO_REUSEADDR, so a port in TIME_WAIT is free for them too.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PortInUseError(host, port, option) from exc


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (for tests and child processes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def find_java() -> Path:
    """The ``java`` Spark will use: ``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not candidate.is_file():
            raise PreflightError(
                f"JAVA_HOME={java_home} has no bin/java; point JAVA_HOME at a JDK "
                f"{MIN_JAVA}+ or unset it to use the java on PATH"
            )
        return candidate
    found = shutil.which("java")
    if found is None:
        raise PreflightError(
            f"Java {MIN_JAVA} or newer is needed to run Spark, but there is no `java` on "
            f"PATH and JAVA_HOME is not set; install a JDK {MIN_JAVA}+ "
            f"(e.g. apt-get install openjdk-{MIN_JAVA}-jre-headless) and try again"
        )
    return Path(found)


def java_major_version(java: Path) -> int:
    """The major version ``java -version`` reports (8 for ``1.8.0_x``)."""
    try:
        result = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError(
            f"could not run `{java} -version` ({exc}); check the Java install"
        ) from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        raise PreflightError(
            f"`{java} -version` printed no version; check the Java install "
            f"(Spark needs Java {MIN_JAVA}+)"
        )
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    return minor if major == 1 else major


def check_java() -> Path:
    """Return the ``java`` to use, or raise when it is missing or older than 17."""
    java = find_java()
    major = java_major_version(java)
    if major < MIN_JAVA:
        raise PreflightError(
            f"Spark 4 needs Java {MIN_JAVA} or newer, but {java} is Java {major}; install "
            f"a JDK {MIN_JAVA}+ and put it first on PATH or set JAVA_HOME to it"
        )
    return java
