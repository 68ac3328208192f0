"""The project's own code as one zip for Spark executors (``spark-submit --py-files``).

On a cluster the executors run the sink's writer, so they must import ``onceover_jobs`` (the
data source and the job) and ``onceover`` (events, the BigQuery helpers). Third-party
packages (pyarrow, the Google clients) come from the executors' Python environment;
our code comes in this zip, so a new version of it needs no new worker image.

The zip holds only ``.py`` files, in a fixed order with fixed timestamps, and is named
by the hash of what it holds: building it twice from the same code gives the same file,
and a changed file gives a new name, so an executor never runs a stale copy.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ("onceover_jobs", "onceover")
"""The top-level packages executors import from this project."""
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def package_dir(name: str) -> Path:
    """Where the installed package ``name`` lives."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _sources(packages: tuple[str, ...]) -> list[tuple[str, Path]]:
    """(name in the zip, file) of every .py file of ``packages``, sorted."""
    found = []
    for package in packages:
        root = package_dir(package)
        for path in root.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            found.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return sorted(found)


def build_py_files(out_dir: Path, packages: tuple[str, ...] = PACKAGES) -> Path:
    """Write ``onceover-py-files-<hash>.zip`` into ``out_dir`` (unless it is there) and
    return its path."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in _sources(packages):
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, path.read_bytes())
    content = buffer.getvalue()
    digest = hashlib.sha256(content).hexdigest()[:16]
    target = out_dir / f"onceover-py-files-{digest}.zip"
    if target.is_file():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    # Written aside, then renamed: a job starting meanwhile never ships half a zip.
    with tempfile.NamedTemporaryFile(dir=out_dir, suffix=".part", delete=False) as part:
        part.write(content)
    os.replace(part.name, target)
    return target
