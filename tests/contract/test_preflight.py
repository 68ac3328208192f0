"""Checks that turn a machine that cannot run a command into one clear line."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from onceover.errors import PortInUseError, PreflightError
from onceover.preflight import check_java, check_port_free, check_python


def _fake_java(directory: Path, version_line: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


def test_missing_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(PreflightError, match=r"Java 17 or newer .* no `java` on PATH"):
        check_java()


def test_old_java_is_refused_with_its_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_java(tmp_path / "bin", 'openjdk version "11.0.22" 2024-01-16')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))

    with pytest.raises(PreflightError, match=r"Spark 4 needs Java 17 or newer, but .* is Java 11"):
        check_java()


def test_java_8_version_scheme_is_understood(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_java(tmp_path / "bin", 'java version "1.8.0_392"')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))

    with pytest.raises(PreflightError, match="is Java 8"):
        check_java()


def test_java_home_without_java_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))

    with pytest.raises(PreflightError, match=f"JAVA_HOME={tmp_path} has no bin/java"):
        check_java()


def test_this_machine_has_java_17_or_newer() -> None:
    assert os.access(check_java(), os.X_OK)


def test_old_python_is_refused() -> None:
    with pytest.raises(
        PreflightError, match=r"Python 3\.11 or newer is needed, this is Python 3\.10\.4"
    ):
        check_python((3, 10, 4))
    check_python((3, 11, 0))


def test_a_listening_port_is_in_use() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 .* --port"):
            check_port_free("127.0.0.1", port, "--port")
    check_port_free("127.0.0.1", port, "--port")
    check_port_free("127.0.0.1", 0, "--port")
