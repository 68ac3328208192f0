"""Errors raised by the shared Onceover package.

The tree::

    OnceoverError                 anything this package raises on purpose
    ├── ConfigurationError        a setting or environment variable is wrong (names it)
    ├── PreflightError            the machine cannot run this (Java, Python, a busy port)
    │   └── PortInUseError
    ├── LocalBigQueryError        the local BigQuery could not start or stop
    │   └── LocalBigQueryVersionError   installed bqemulator is not the pinned version
    └── LedgerError               the ledger is unreadable (onceover.ledger_files); the
        │                         sink raises it and its subclasses (onceover_jobs.sink.errors)
        └── LedgerStoreError      its storage cannot be reached or refused (names the URL)
            └── UnsuitableLedgerStorageError   the storage lacks what a ledger needs
                                  (hard links, conditional writes): refused up front

Every message is one line a person can act on: the command line prints it as
``onceover: <message>`` and exits with status 2, no traceback.
"""

import re


class OnceoverError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigurationError(OnceoverError):
    """A setting or environment variable is missing or wrong; the message names it."""


class PreflightError(OnceoverError):
    """This machine lacks something the command needs (Java, Python, a free port)."""


class PortInUseError(PreflightError):
    """A port the command must listen on is already taken."""

    def __init__(self, host: str, port: int, option: str) -> None:
        self.host = host
        self.port = port
        self.option = option
        super().__init__(
            f"port {port} on {host} is already in use; stop whatever holds it "
            f"or choose another with {option} (0 picks a free port)"
        )


class LocalBigQueryError(OnceoverError):
    """The local BigQuery (bqemulator) could not start or stop."""


class LocalBigQueryVersionError(LocalBigQueryError):
    """The installed bqemulator is not the version the launcher's patches target."""


class LedgerError(OnceoverError):
    """The ledger cannot be read or written, or disagrees with what BigQuery says.

    Raised by the readers of :mod:`onceover.ledger_files`; the sink's
    ``onceover_jobs.sink.errors.LedgerError`` is this class, and its refusals subclass it."""


class LedgerStoreError(LedgerError):
    """The ledger's storage (:mod:`onceover.ledger_store`) could not be reached or refused
    a request: the message names the URL and the cause, as the store's client gave it."""

    def __init__(self, where: str, cause: object) -> None:
        self.where = where
        self.cause = cause
        super().__init__(f"the ledger at {where}: {_one_line(cause)}")


class UnsuitableLedgerStorageError(LedgerStoreError):
    """The storage lacks what the ledger's exactly-once needs (a disk without hard links,
    a bucket that ignores conditional writes): found by the probe every write leaves,
    before a row is written, and refused with the fix."""

    def __init__(self, where: str, problem: str) -> None:
        LedgerError.__init__(self, f"{problem}; nothing was written")
        self.where = where
        self.cause = problem


def _one_line(cause: object) -> str:
    """A client's error as one line: object-store clients add pages of debug detail, and
    S3 and Azure put what went wrong in an XML body (``<Code>``, ``<Message>``)."""
    text = str(cause).strip() or type(cause).__name__
    first = text.splitlines()[0].strip()
    code = re.search(r"<Code>([^<]*)</Code>", text)
    message = re.search(r"<Message>([^<]*)</Message>", text)
    if code or message:
        said = ": ".join(m.group(1).strip() for m in (code, message) if m)
        first = f"{first.rstrip(': ')}: {said}"
    return first if len(first) <= 400 else first[:400] + "..."
