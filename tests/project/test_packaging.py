"""The zip of this project's code that ``spark-submit --py-files`` ships to executors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
import zipimport
from pathlib import Path

from onceover_backend.services.launch.launcher import with_py_files

from onceover.packaging import PACKAGES, build_py_files, package_dir


def test_the_zip_holds_every_module_of_both_packages_and_is_stable(tmp_path: Path) -> None:
    first = build_py_files(tmp_path / "a")
    again = build_py_files(tmp_path / "b")

    assert first.name == again.name  # named by content: same code, same name
    assert first.read_bytes() == again.read_bytes()
    with zipfile.ZipFile(first) as archive:
        names = set(archive.namelist())
    for package in PACKAGES:
        root = package_dir(package)
        expected = {
            f"{package}/{p.relative_to(root).as_posix()}"
            for p in root.rglob("*.py")
            if "__pycache__" not in p.parts
        }
        assert expected <= names, sorted(expected - names)[:5]
    assert "onceover_jobs/sink/__init__.py" in names
    assert "onceover_jobs/load_files.py" in names
    assert not [n for n in names if not n.endswith(".py")]


def test_a_module_imports_from_the_zip_alone(tmp_path: Path) -> None:
    zip_path = build_py_files(tmp_path)
    importer = zipimport.zipimporter(str(zip_path) + "/onceover")
    spec = importer.find_spec("identifiers")  # a module without third-party imports
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__file__ is not None
    assert str(zip_path) in module.__file__
    assert module.TABLE_ID_RE.match("my-project.sales.orders")


def test_a_changed_file_gives_a_new_zip(tmp_path: Path) -> None:
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("A = 1\n")
    sys.path.insert(0, str(tmp_path / "src"))
    try:
        first = build_py_files(tmp_path / "out", packages=("pkg",))
        (package / "__init__.py").write_text("A = 2\n")
        second = build_py_files(tmp_path / "out", packages=("pkg",))
    finally:
        sys.path.remove(str(tmp_path / "src"))
        sys.modules.pop("pkg", None)
    assert first != second
    assert first.is_file()
    assert second.is_file()


def test_our_zip_joins_the_operators_py_files() -> None:
    ours = Path("/data/py-files/onceover-py-files-1.zip")
    assert with_py_files([], ours) == ["--py-files", str(ours)]
    assert with_py_files(["--conf", "a=b", "--py-files", "deps.zip"], ours) == [
        "--conf", "a=b", "--py-files", f"deps.zip,{ours}",
    ]  # fmt: skip
    assert with_py_files(["--py-files=deps.zip"], ours) == [f"--py-files=deps.zip,{ours}"]


def test_the_command_prints_the_zip_it_built(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "onceover_tools", "py-files", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (built,) = tmp_path.glob("onceover-py-files-*.zip")
    assert done.stdout.strip() == str(built.resolve())
    assert zipfile.is_zipfile(built)
