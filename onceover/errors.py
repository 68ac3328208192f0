"""Errors raised by the shared Onceover package.

The tree::

    OnceoverError                 anything this package raises on purpose
    ├── ConfigurationError        a setting or environment variable is wrong (names it)
    ├── PreflightError            the machine cannot run this (Java, Python, a busy port)
    │   └── PortInUseError
    ├── LocalBigQueryError        the local BigQuery could not start or stop
    │   └── LocalBigQueryVersionError   installed bqemulator is not the pinned version
    └── LedgerError               the ledger is unreadable (onceover.ledger_files); the
                                  sink raises it and its subclasses (onceover_jobs.sink.errors)

Every message is one line a person can act on: the command line prints it as
``onceover: <message>`` and exits with status 2, no traceback.
"""


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
