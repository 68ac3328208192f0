"""``wide_proto_rows``: proto rows of a writer schema of up to 10,000 columns decode.

bqemulator decoded proto rows through a message class the protobuf runtime (upb) builds
from the writer schema, and upb builds no message whose fields take over 65,535 bytes in
memory (16 a STRING field): a writer schema of more than about 4,000 STRING columns failed
at the connection's first request ("Error building mini table: Message size exceeded
maximum size of 65535 bytes") and the call ended with UNKNOWN. BigQuery takes the proto
writer schema of any table it holds, up to its 10,000 columns. When the schema cannot be
built whole, the patch builds it in parts of at most :data:`PROTO_FIELDS_PER_PART`
top-level fields (each with every nested type), parses each row with every part (the
other parts' fields pass as unknown fields) and joins the values: the dict bqemulator's
decoder gives for a schema it can build. Schemas it can build are decoded as before.

Pinned by ``tests/localbq/test_limits.py``: ``test_proto_rows_of_a_10000_column_table_are_decoded``.
"""

from __future__ import annotations

from typing import Any

from onceover.errors import LocalBigQueryVersionError

PROTO_FIELDS_PER_PART = 3_000
"""Top-level fields of one part of a writer schema too wide for upb: at most 16 bytes each
in memory, under upb's 65,535 bytes a message."""


def _too_wide(exc: Exception) -> bool:
    """upb's refusal of a message whose fields take over 65,535 bytes."""
    return "mini table" in str(exc) and "maximum size" in str(exc)


def apply() -> None:
    """Decode proto rows of writer schemas too wide for one upb message class."""
    from bqemulator.grpc_api import write_servicer
    from bqemulator.streaming import proto_deserializer
    from google.protobuf import descriptor_pb2

    original: Any = getattr(write_servicer, "ProtoRowDecoder", None)
    if original is not proto_deserializer.ProtoRowDecoder:
        raise LocalBigQueryVersionError(
            "bqemulator's write servicer no longer decodes proto rows with "
            "proto_deserializer.ProtoRowDecoder; the launcher's patches need to be re-checked"
        )

    class WideProtoRowDecoder(original):  # type: ignore[misc]
        """bqemulator's decoder, in parts when upb cannot build the schema whole."""

        def __init__(self, descriptor_proto: descriptor_pb2.DescriptorProto) -> None:
            self._onceover_parts: list[Any] = []
            try:
                super().__init__(descriptor_proto)
                return
            except TypeError as exc:
                if not _too_wide(exc) or len(descriptor_proto.field) <= PROTO_FIELDS_PER_PART:
                    raise
            fields = list(descriptor_proto.field)
            for start in range(0, len(fields), PROTO_FIELDS_PER_PART):
                part = descriptor_pb2.DescriptorProto()
                part.CopyFrom(descriptor_proto)
                del part.field[:]
                part.field.extend(fields[start : start + PROTO_FIELDS_PER_PART])
                self._onceover_parts.append(original(part))
            self._field_names = tuple(field.name for field in fields)

        def decode(self, serialized_row: bytes) -> dict[str, Any]:
            if not self._onceover_parts:
                return dict(super().decode(serialized_row))
            values: dict[str, Any] = {}
            for part in self._onceover_parts:
                values.update(part.decode(serialized_row))
            return {name: values[name] for name in self._field_names}

    WideProtoRowDecoder.__name__ = WideProtoRowDecoder.__qualname__ = "ProtoRowDecoder"
    # _rows_for_request looks the class up by name in the servicer's module.
    setattr(write_servicer, "ProtoRowDecoder", WideProtoRowDecoder)  # noqa: B010
