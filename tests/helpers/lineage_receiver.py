"""A stand-in for an OpenLineage receiver (Marquez's ``POST /api/v1/lineage``): one run
event a POST, each validated before it is kept, in the order it came.

Validation, with nothing fetched from the network:

- the event is built into the openlineage-python client's own models (``RunEvent``,
  ``Run``, ``Job``, ``OutputDataset`` and the standard facets the sink sends), which
  check the event type, the ``runId`` UUID, ``eventTime`` and each field's name and
  declared type; serialised back by the client, it must be the event that came, so
  no field is misspelt or in the wrong place, and every standard facet names the
  ``_schemaURL`` of the client's version;
- the ``onceover_receipts`` run facet against its JSON schema as the repository ships
  it (``docs/openlineage/OnceoverReceiptsRunFacet.json``).

An invalid event is answered 400 with what is wrong, and counted in ``refused``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import attr
import jsonschema_rs
from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    schema_dataset,
)
from openlineage.client.serde import Serde

from tests.helpers.local_http import JsonPostHandler, LocalServer

API_KEY = "lineage-key"
ENDPOINT = "/api/v1/lineage"
FACET_SCHEMA = (
    Path(__file__).resolve().parents[2] / "docs" / "openlineage" / "OnceoverReceiptsRunFacet.json"
)
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
# What the facet's schema takes from the spec: a run facet is an object with its producer
# and schema URL (the spec's BaseFacet), given here so that validating reads no network.
_SPEC_RUN_FACET = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SPEC,
    "$defs": {
        "RunFacet": {
            "type": "object",
            "properties": {
                "_producer": {"type": "string", "format": "uri"},
                "_schemaURL": {"type": "string", "format": "uri"},
            },
            "required": ["_producer", "_schemaURL"],
        }
    },
}
_STANDARD: dict[str, dict[str, type[Any]]] = {
    "run": {"errorMessage": error_message_run.ErrorMessageRunFacet},
    "job": {"jobType": job_type_job.JobTypeJobFacet},
    "dataset": {"schema": schema_dataset.SchemaDatasetFacet},
    "output": {
        "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet
    },
}
CUSTOM = {"onceover_receipts"}


class LineageError(ValueError):
    """What is wrong with an event, for the 400 answer."""


def receipts_validator() -> Any:
    registry = jsonschema_rs.Registry([(SPEC, _SPEC_RUN_FACET)])
    schema = json.loads(FACET_SCHEMA.read_text())
    return jsonschema_rs.validator_for(schema, registry=registry, validate_formats=True)


_VALIDATOR = receipts_validator()


def validate(event: Any) -> None:
    """Raise :class:`LineageError` naming what is wrong with ``event``."""
    if not isinstance(event, dict):
        raise LineageError("the body is not a JSON object")
    model = _run_event(event)
    sent_back = _pruned(Serde.to_dict(model))
    expected = _pruned(_without_custom(event))
    if sent_back != expected:
        raise LineageError(
            f"the client's RunEvent does not read it as sent: {_difference(expected, sent_back)}"
        )
    facets = (event.get("run") or {}).get("facets") or {}
    for name in CUSTOM & set(facets):
        problems = [
            f"run.facets/{'/'.join(map(str, e.instance_path))}: {e.message}"
            for e in _VALIDATOR.iter_errors({name: facets[name]})
        ]
        if problems:
            raise LineageError("; ".join(problems))


def _run_event(event: dict[str, Any]) -> RunEvent:
    try:
        run, job = event["run"], event["job"]
        outputs = [
            OutputDataset(
                namespace=o["namespace"],
                name=o["name"],
                facets=_facets("dataset", o.get("facets")),
                outputFacets=_facets("output", o.get("outputFacets")),
            )
            for o in event.get("outputs") or []
        ]
        if event.get("inputs"):
            raise LineageError("the sink reads no dataset: inputs must be empty")
        return RunEvent(
            eventType=RunState(event["eventType"]),
            eventTime=event["eventTime"],
            producer=event["producer"],
            run=Run(runId=run["runId"], facets=_facets("run", run.get("facets"))),
            job=Job(
                namespace=job["namespace"],
                name=job["name"],
                facets=_facets("job", job.get("facets")),
            ),
            outputs=outputs,
        )
    except LineageError:
        raise
    except KeyError as exc:
        raise LineageError(f"missing {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise LineageError(f"{type(exc).__name__}: {exc}") from None


def _facets(kind: str, given: Any) -> dict[str, Any]:
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise LineageError(f"{kind} facets are not an object")
    built = {}
    for name, facet in given.items():
        if name in CUSTOM:
            continue
        cls = _STANDARD[kind].get(name)
        if cls is None:
            raise LineageError(f"{kind} facet {name!r} is not one the sink sends")
        fields = {k: v for k, v in facet.items() if k not in ("_producer", "_schemaURL")}
        if name == "schema":
            fields["fields"] = [_schema_field(f) for f in fields.get("fields", [])]
        value = cls(producer=facet["_producer"], **fields)
        _check_types(value, f"{kind}.facets.{name}")
        if facet.get("_schemaURL") != value._schemaURL:
            raise LineageError(
                f"{kind} facet {name}: _schemaURL {facet.get('_schemaURL')!r}, the client's "
                f"is {value._schemaURL!r}"
            )
        built[name] = value
    return built


def _schema_field(field: dict[str, Any]) -> Any:
    nested = [_schema_field(f) for f in field.get("fields", [])]
    value = schema_dataset.SchemaDatasetFacetFields(**{**field, "fields": nested})
    _check_types(value, f"schema field {field.get('name')}")
    return value


_SCALARS: dict[str, tuple[type, ...]] = {"int": (int,), "str": (str,), "float": (int, float)}


def _check_types(value: Any, where: str) -> None:
    """The models' declared scalar types (attrs checks none of them itself)."""
    for field in attr.fields(type(value)):
        declared = str(field.type).replace(" ", "")
        optional = declared.endswith("|None")
        kinds = _SCALARS.get(declared.removesuffix("|None"))
        got = getattr(value, field.name)
        if kinds is None or (optional and got is None):
            continue
        if isinstance(got, bool) or not isinstance(got, kinds):
            raise LineageError(f"{where}.{field.name}: {got!r} is not {declared}")


def _without_custom(event: dict[str, Any]) -> dict[str, Any]:
    copy = json.loads(json.dumps(event))
    for name in CUSTOM:
        ((copy.get("run") or {}).get("facets") or {}).pop(name, None)
    return dict(copy)


def _pruned(value: Any) -> Any:
    """Without nulls and empty lists or objects (the client leaves some out, the sink others)."""
    if isinstance(value, dict):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _difference(expected: Any, got: Any, path: str = "") -> str:
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            if expected.get(key) != got.get(key):
                return _difference(expected.get(key), got.get(key), f"{path}.{key}")
    return f"{path.lstrip('.') or 'the event'}: sent {expected!r}, read as {got!r}"


class LineageReceiver(LocalServer):
    """An OpenLineage HTTP receiver that keeps the valid events it gets (see above)."""

    handler = JsonPostHandler

    def __init__(self, api_key: str | None = API_KEY) -> None:
        super().__init__()
        self.api_key = api_key
        self.events: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self.posts = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def receive(self, path: str, authorization: str | None, body: bytes) -> tuple[int, Any]:
        with self._lock:
            self.posts += 1
        if path != ENDPOINT:
            return 404, {"error": f"no {path} here"}
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            return 401, {"error": "invalid api key"}
        try:
            event = json.loads(body)
            validate(event)
        except (ValueError, LineageError) as exc:
            with self._lock:
                self.refused.append(str(exc))
            return 400, {"error": str(exc)}
        with self._lock:
            self.events.append(event)
        return 201, {}

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.received() if e["eventType"] == event_type]


def receipts_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The receipts an event carries."""
    facet: dict[str, Any] = event["run"]["facets"]["onceover_receipts"]
    receipts: list[dict[str, Any]] = facet["receipts"]
    return receipts
