"""The archive of Spark's classes the tests' JVMs map (onceover_tools.jvm_archive).

``make test`` builds it before the tests; the checks on a real JVM need it built and
say so when it is not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from onceover_tools import jvm_archive
from pyspark.sql import SparkSession

from onceover.errors import OnceoverError
from onceover.preflight import find_java
from onceover.processes import CLASS_ARCHIVE_ENV, QUICK_JVM, QUIET_CDS, with_quick_jvm


def _options(env: dict[str, str]) -> list[str]:
    return env["JDK_JAVA_OPTIONS"].split()


def test_jvms_map_the_archive_only_where_it_is(tmp_path: Path) -> None:
    archive = tmp_path / "spark-classes.jsa"
    base = {"JDK_JAVA_OPTIONS": "-Xmx1g", CLASS_ARCHIVE_ENV: str(archive)}

    assert _options(with_quick_jvm(base)) == ["-Xmx1g", QUICK_JVM]  # not built: not named

    archive.write_bytes(b"built")
    once = with_quick_jvm(base)
    assert _options(once) == [
        "-Xmx1g", QUICK_JVM, f"-XX:SharedArchiveFile={archive}", *QUIET_CDS.split()
    ]  # fmt: skip
    assert with_quick_jvm(once) == once  # a child's environment made again: nothing twice
    assert _options(with_quick_jvm({})) == [QUICK_JVM]


def test_an_archive_is_rebuilt_when_what_it_was_built_with_changed(tmp_path: Path) -> None:
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"built")
    key = tmp_path / "spark-classes.jsa.key"

    assert not jvm_archive.is_current(archive)  # no key: whatever built it is unknown
    key.write_text(jvm_archive.build_key())
    assert jvm_archive.is_current(archive)
    key.write_text(jvm_archive.build_key().replace("pyspark", "pyspark 0.0 was"))
    assert not jvm_archive.is_current(archive)


@pytest.mark.parametrize(
    ("what", "failure"),
    [
        ("build", RuntimeError("the training job exited 1:\nno Spark here")),
        ("find_java", OnceoverError("Java 17 or newer is needed to run Spark")),
    ],
)
def test_a_failed_build_says_why_and_lets_the_tests_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    what: str,
    failure: Exception,
) -> None:
    def fails(*_: object) -> float:
        raise failure

    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"built by another Java")  # so its key is asked for
    (tmp_path / "spark-classes.jsa.key").write_text("java 11\n")
    monkeypatch.setattr(jvm_archive, what, fails)

    assert jvm_archive.main([str(archive)]) == 0
    said = capsys.readouterr().err
    assert "not built, JVMs start without it" in said
    assert str(failure) in said


def _built() -> Path:
    archive = Path(os.environ.get(CLASS_ARCHIVE_ENV, ""))
    if not archive.is_file():
        pytest.skip(f"no JVM class archive at {archive} (make test builds it first)")
    return archive


def test_the_shared_spark_sessions_jvm_maps_the_archive(spark: SparkSession) -> None:
    archive = _built()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = jvm.java.lang.ProcessHandle.current().pid()

    maps = Path(f"/proc/{pid}/maps").read_text()

    assert str(archive.resolve()) in maps


def test_a_jvm_that_cannot_use_the_archive_says_nothing_on_standard_output() -> None:
    """``java -version`` has no class path, so Spark's archive does not fit it; nor does
    it fit Spark's launcher, whose standard output ``spark-class`` runs as a command."""
    archive = _built()
    java = str(find_java())
    env = {k: v for k, v in os.environ.items() if k != "JDK_JAVA_OPTIONS"}  # the tests' own

    def stdout(*options: str) -> str:
        done = subprocess.run(
            [java, f"-XX:SharedArchiveFile={archive}", *options, "-version"],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "Unable to use shared archive" in stdout()  # what QUIET_CDS is for
    assert stdout(*QUIET_CDS.split()) == ""
