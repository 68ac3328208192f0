"""Where the sink's OpenLineage events go, found the way OpenLineage's own clients find it.

First match wins (the openlineage-python client's order, the sink's options standing
where that client's constructor arguments do):

1. ``OPENLINEAGE_DISABLED=true``: no events, whatever else is set.
2. The sink's options ``openlineage.url`` (with ``openlineage.endpoint``,
   ``openlineage.api_key``).
3. A config file with a ``transport``: the ``openlineage.config`` option, else
   ``$OPENLINEAGE_CONFIG``, else ``./openlineage.yml``, else
   ``~/.openlineage/openlineage.yml``. Only ``type: http`` is supported (``url``,
   ``endpoint``, ``timeout``, ``auth: {type: api_key, apiKey: ...}``).
4. ``OPENLINEAGE_URL`` (with ``OPENLINEAGE_ENDPOINT``, ``OPENLINEAGE_API_KEY``).
5. Nothing: no events (the client would print them to the console, which in a Spark
   worker nobody reads).

The job namespace is ``openlineage.namespace``, else ``$OPENLINEAGE_NAMESPACE``, else
``default``. The client's ``OPENLINEAGE__...`` variables are not read.

Resolved once on the driver before any task runs (:func:`resolve`), so a wrong file
fails the write at its start, naming the field, and never a commit.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from onceover_jobs.sink.errors import LineageConfigError, SinkOptionError

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "api/v1/lineage"
DEFAULT_NAMESPACE = "default"
DEFAULT_TIMEOUT_S = 5.0
CONFIG_FILE = "openlineage.yml"

OPTIONS = frozenset(
    {
        "openlineage.url",
        "openlineage.endpoint",
        "openlineage.api_key",
        "openlineage.namespace",
        "openlineage.config",
        "openlineage.run_id",
    }
)
"""The sink's options of this module (lower case, as Spark hands them over)."""

_TRUE = frozenset({"true", "1", "yes", "on"})
# The HTTP transport's settings this sink does not act on: accepted, so one file serves
# the OpenLineage clients too, and said once in the driver's log.
_IGNORED = frozenset({"verify", "compression", "custom_headers", "retry", "session", "adapter"})


@dataclass(frozen=True)
class LineageConfig:
    """An OpenLineage HTTP receiver: events are posted one by one to :attr:`target`."""

    url: str
    endpoint: str = DEFAULT_ENDPOINT
    api_key: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    timeout_s: float = DEFAULT_TIMEOUT_S
    source: str = "the sink's options"
    """Where it was found, for log lines and errors."""
    run_id: str | None = None
    """The OpenLineage ``runId`` of a job that reports its own run (``openlineage.run_id``);
    None: the sink derives it from the run and the attempt."""

    @property
    def target(self) -> str:
        """Where events are posted: the endpoint resolved against the URL, as the
        OpenLineage client does (an absolute endpoint replaces the URL's path)."""
        return urljoin(self.url, self.endpoint)


def resolve(
    options: Mapping[str, str],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
) -> LineageConfig | None:
    """The receiver the sink's events go to, or None; a wrong setting raises
    :class:`LineageConfigError` (a ``ValueError``) naming it and where it was read.

    ``options`` are the sink's, keys in lower case; ``env``, ``cwd`` and ``home``
    default to this process's.
    """
    env = os.environ if env is None else env
    found = _receiver(options, env, cwd or Path.cwd(), home or Path.home())
    run_id = options.get("openlineage.run_id") or None
    if run_id is not None:
        try:
            run_id = str(uuid.UUID(run_id))
        except ValueError:
            raise SinkOptionError("openlineage.run_id", f"{run_id!r} is not a UUID") from None
    return None if found is None else replace(found, run_id=run_id)


def _receiver(
    options: Mapping[str, str], env: Mapping[str, str], cwd: Path, home: Path
) -> LineageConfig | None:
    namespace = _namespace(options, env)
    if env.get("OPENLINEAGE_DISABLED", "").strip().lower() in _TRUE:
        return None
    url = options.get("openlineage.url") or None
    if url is not None:
        return LineageConfig(
            url=_http_url(url, "openlineage.url", "the sink's options"),
            endpoint=options.get("openlineage.endpoint") or DEFAULT_ENDPOINT,
            api_key=options.get("openlineage.api_key") or None,
            namespace=namespace,
        )
    for name in ("openlineage.endpoint", "openlineage.api_key"):
        if options.get(name):
            raise SinkOptionError(name, "given without openlineage.url")
    path = _config_file(options, env, cwd, home)
    if path is not None:
        found = _from_file(path, namespace)
        if found is not None:
            return found
    url = env.get("OPENLINEAGE_URL") or None
    if url is None:
        return None
    return LineageConfig(
        url=_http_url(url, "OPENLINEAGE_URL", "the environment"),
        endpoint=env.get("OPENLINEAGE_ENDPOINT") or DEFAULT_ENDPOINT,
        api_key=env.get("OPENLINEAGE_API_KEY") or None,
        namespace=namespace,
        source="OPENLINEAGE_URL",
    )


def _namespace(options: Mapping[str, str], env: Mapping[str, str]) -> str:
    given = options.get("openlineage.namespace") or env.get("OPENLINEAGE_NAMESPACE") or ""
    return given.strip() or DEFAULT_NAMESPACE


def _config_file(
    options: Mapping[str, str], env: Mapping[str, str], cwd: Path, home: Path
) -> Path | None:
    """The config file the client would read. One named explicitly must exist: a typo
    there would otherwise send the events somewhere else, or nowhere, in silence."""
    for given, name in (
        (options.get("openlineage.config"), "openlineage.config"),
        (env.get("OPENLINEAGE_CONFIG"), "OPENLINEAGE_CONFIG"),
    ):
        if given:
            path = Path(given).expanduser()
            if not path.is_file():
                raise LineageConfigError(name, f"{given!r} is not a readable file", "")
            return path
    for path in (cwd / CONFIG_FILE, home / ".openlineage" / CONFIG_FILE):
        if path.is_file():
            return path
    return None


def _from_file(path: Path, namespace: str) -> LineageConfig | None:
    """The file's HTTP transport; None when it has no ``transport`` (the client goes
    on to ``OPENLINEAGE_URL`` then)."""
    import yaml

    where = str(path)
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LineageConfigError("", f"cannot be read as YAML: {exc}", where) from exc
    if content is None:
        return None
    if not isinstance(content, dict):
        raise LineageConfigError("", "is not a mapping (transport: ...)", where)
    transport = content.get("transport")
    if transport is None:
        return None
    if not isinstance(transport, dict):
        raise LineageConfigError("transport", "is not a mapping (type: http, url: ...)", where)
    kind = transport.get("type")
    if kind is None:
        return None
    if kind != "http":
        raise LineageConfigError(
            "transport.type",
            f"{kind!r} is not supported: the sink sends its events over http only "
            "(type: http, url: ...)",
            where,
        )
    url = transport.get("url")
    if not isinstance(url, str) or not url:
        raise LineageConfigError("transport.url", "required for type http", where)
    endpoint = transport.get("endpoint", DEFAULT_ENDPOINT)
    if not isinstance(endpoint, str):
        raise LineageConfigError("transport.endpoint", f"{endpoint!r} is not a path", where)
    ignored = sorted(set(transport) & _IGNORED)
    if ignored:
        logger.warning(
            "%s: transport.%s not used by the onceover sink", where, ", transport.".join(ignored)
        )
    return LineageConfig(
        url=_http_url(url, "transport.url", where),
        endpoint=endpoint or DEFAULT_ENDPOINT,
        api_key=_api_key(transport.get("auth"), where),
        namespace=namespace,
        timeout_s=_timeout(transport.get("timeout", DEFAULT_TIMEOUT_S), where),
        source=where,
    )


def _api_key(auth: Any, where: str) -> str | None:
    if auth is None:
        return None
    if not isinstance(auth, dict):
        raise LineageConfigError("transport.auth", "is not a mapping (type: api_key, ...)", where)
    kind = auth.get("type")
    if kind != "api_key":
        raise LineageConfigError(
            "transport.auth.type", f"{kind!r} is not supported: use api_key", where
        )
    # The client's spellings, all three.
    key = auth.get("apiKey") or auth.get("apikey") or auth.get("api_key")
    if not isinstance(key, str) or not key:
        raise LineageConfigError("transport.auth.apiKey", "required for auth type api_key", where)
    return key


def _timeout(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LineageConfigError("transport.timeout", f"{value!r} is not seconds", where)
    if not (math.isfinite(value) and 0 < value <= 300):
        raise LineageConfigError("transport.timeout", f"{value} is outside (0, 300]", where)
    return float(value)


def _http_url(url: str, field: str, where: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        if field.startswith("openlineage."):
            raise SinkOptionError(field, f"{url!r} is not an http(s) URL")
        raise LineageConfigError(field, f"{url!r} is not an http(s) URL", where)
    return url
