"""Where spools live: a private root per user, and in it a folder per receiver and token.

* A file is only ever sent with the token it was spooled under: each receiver URL and
  token has a folder of its own (named by a hash, never the token), so one job's
  revoked token cannot touch another job's events.
* The root is this user's alone: another user could read events in a shared one, or
  plant some for this job's token to send; a temporary root that is not private is
  refused, not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from onceover.errors import ConfigurationError

SPOOL_DIR_ENV = "ONCEOVER_SPOOL_DIR"


def default_spool_root() -> Path:
    """Where spools go: ``$ONCEOVER_SPOOL_DIR``; else ``$XDG_STATE_HOME/onceover/spool``
    (``~/.local/state/onceover/spool``), the ``onceover`` folder made private (0700);
    else, without a home to write in, ``<tmp>/onceover-<uid>/spool``.

    Raises :class:`ConfigurationError` naming ``<tmp>/onceover-<uid>`` when it is not
    this user's own private folder: another user could read events there, or plant
    some for this job's token to send.
    """
    configured = os.environ.get(SPOOL_DIR_ENV)
    if configured:
        return Path(configured)
    state = os.environ.get("XDG_STATE_HOME", "")
    try:
        # The XDG spec ignores a relative XDG_STATE_HOME.
        home = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
        base = home / "onceover"
        base.parent.mkdir(parents=True, exist_ok=True)
        base.mkdir(mode=0o700, exist_ok=True)
    except (OSError, RuntimeError):  # no home, or none to write in (HOME=/nonexistent)
        base = _private_temp_folder(Path(tempfile.gettempdir()) / f"onceover-{os.getuid()}")
    spool = base / "spool"
    spool.mkdir(mode=0o700, exist_ok=True)
    return spool


def _private_temp_folder(folder: Path) -> Path:
    """``folder`` in a directory every user writes in, made or checked to be ours alone."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    uid = os.getuid()
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != uid:
        problem = f"belongs to uid {info.st_uid}, not to this user (uid {uid})"
    elif info.st_mode & 0o022:
        problem = f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is not None:
        raise ConfigurationError(
            f"refusing to spool events in {folder}: it {problem}, so others could read "
            f"this job's events or plant some for its token to send; remove it, or set "
            f"{SPOOL_DIR_ENV} to a folder only this user can write"
        )
    if info.st_mode & 0o077:  # ours, but readable by others: events name jobs and tables
        folder.chmod(0o700)
    return folder


def spool_dirs(root: Path, url: str, token: str | None) -> tuple[Path, Path]:
    """The spool of ``url`` and ``token`` under ``root``, and the folder of that backend
    any token may send (the layout before spools were per token; parked files are
    moved there to be sent again)."""
    backend = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
    shared = root / f"backend-{backend}"
    if not token:
        return shared.with_name(f"{shared.name}-no-token"), shared
    # A hash, not the token: folder names show in logs and listings.
    digest = hashlib.sha256(f"{backend}\0{token}".encode()).hexdigest()[:16]
    return shared.with_name(f"{shared.name}-token-{digest}"), shared
