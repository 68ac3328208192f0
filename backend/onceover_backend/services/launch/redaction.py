"""Secrets out of what people read: launch commands, log headers, stored job arguments.

Arguments are redacted by what they look like, since nobody can list every secret a
job or ``ONCEOVER_SPARK_SUBMIT_ARGS`` may carry:

- the value of an option whose name says it is secret (``--monitor-token X``,
  ``--password=X``), and of a ``name=value`` argument whose name does
  (``spark.hadoop.fs.s3a.secret.key=X`` after ``--conf``, ``-Dtrust.password=X``);
- the password of a URL (``https://user:X@host``) and the values of query parameters
  whose names say they are secret (``?sig=X``, ``?token=X``);
- in a launch command, every value the deployer gave in ``ONCEOVER_SPARK_SUBMIT_ARGS``
  (a deployment's settings, not the job's, and often credentials: ``redacted_command``).

The process itself gets the real arguments; only what is stored or shown is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
_SECRET_NAME = re.compile(
    r"(token|secret|passw(or)?d|passphrase|credential|api[-_.]?key|private[-_.]?key|"
    r"access[-_.]?key|client[-_.]?key|auth|signature|\bsig\b|session[-_.]?key|"
    r"keystore|truststore[-_.]?pass)",
    re.IGNORECASE,
)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def _redact_url(value: str) -> str:
    try:
        parts = urlsplit(value)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", f":{MASK}@", 1)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_name(name) for name, _ in pairs):
            query = urlencode(
                [(name, MASK if secret_name(name) else v) for name, v in pairs], safe="*"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_value(arg: str) -> str:
    """One argument on its own: a ``name=value`` pair or a URL."""
    if _URL.match(arg):
        return _redact_url(arg)
    name, equals, value = arg.partition("=")
    if equals and secret_name(name):
        return f"{name}={MASK}"
    if equals and _URL.match(value):
        return f"{name}={_redact_url(value)}"
    return arg


def redacted_args(argv: Iterable[str]) -> list[str]:
    """``argv`` with every secret-looking value replaced by ``***``."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        if arg.startswith("-") and "=" not in arg and secret_name(arg):
            out.append(arg)
            hide_next = True  # ``--token X``: the value is the next argument
            continue
        out.append(_redact_value(arg))
    return out


def redacted_command(argv: list[str], deployer_args: list[str]) -> list[str]:
    """A launch command as people may read it: the values the deployer gave in
    ``ONCEOVER_SPARK_SUBMIT_ARGS`` masked whole (their option names stay, so the shape
    of the command can be read), the rest by :func:`redacted_args`."""
    hidden = {arg for arg in deployer_args if not arg.startswith("-")}
    return [MASK if arg in hidden else arg for arg in redacted_args(argv)]


def redacted_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A stored job spec with its arguments redacted."""
    args = spec.get("args")
    if not isinstance(args, list):
        return dict(spec)
    return {**spec, "args": redacted_args(str(arg) for arg in args)}
