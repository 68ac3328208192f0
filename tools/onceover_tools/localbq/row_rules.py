"""The column rules BigQuery checks on every appended row, for the ``row_errors`` patch.

BigQuery enforces a table's column rules when a value is written to the column
("Parameterized type constraints are enforced when writing a value to a parameterized
column", GoogleSQL data types): ``STRING(L)`` holds at most L characters, ``BYTES(L)``
at most L bytes (``TableFieldSchema.maxLength``), ``NUMERIC(P, S)`` / ``BIGNUMERIC(P,
S)`` are rounded to S fractional digits (``roundingMode``; ``ROUND_HALF_AWAY_FROM_ZERO``
unless ``ROUND_HALF_EVEN``) and must then lie in ``[-10^(P-S) + 10^-S, 10^(P-S) -
10^-S]`` (``TableFieldSchema.precision``; precision without scale means scale 0), and a
REQUIRED column (a RECORD's member too, when the RECORD itself has a value) has a value.
Without ``precision`` a NUMERIC is NUMERIC(38, 9) and a BIGNUMERIC has scale 38 and a
range wider than any Arrow ``decimal256`` of that scale holds.

:func:`check_rows` applies those rules to the rows of one append, as bqemulator lined
them up with the table (an Arrow table in the table's column order and types), and
returns the rows as they are to be stored (decimals rounded) and the first problem of
each bad row. Only pyarrow compute kernels run over every value; Python touches the
values that break a rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NUMERIC_DEFAULT = (38, 9)
"""NUMERIC without parameters: precision 38, scale 9 (29 digits before the point)."""
BIGNUMERIC_DEFAULT_SCALE = 38
"""BIGNUMERIC without parameters: scale 38; its range (about ±5.79E+38) holds every
value an Arrow ``decimal256`` of scale 38 can, so only a larger scale is rounded."""

_ROUND_MODES = {"ROUND_HALF_EVEN": "half_to_even"}
"""BigQuery's ``roundingMode`` -> pyarrow's; anything else (unset, UNSPECIFIED,
ROUND_HALF_AWAY_FROM_ZERO) rounds half away from zero."""
_ROUND_HALF_AWAY_FROM_ZERO = "half_towards_infinity"  # pyarrow: ties away from zero

_TYPE_ALIASES = {"DECIMAL": "NUMERIC", "BIGDECIMAL": "BIGNUMERIC", "STRUCT": "RECORD"}


class FieldSchema(Protocol):
    """What the checks read of a column: bqemulator's catalog ``TableFieldSchema``
    (with the parameters the ``row_errors`` patch keeps)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def max_length(self) -> int | None: ...
    @property
    def precision(self) -> int | None: ...
    @property
    def scale(self) -> int | None: ...
    @property
    def rounding_mode(self) -> str | None: ...
    @property
    def fields(self) -> Sequence[FieldSchema]: ...


Problems = dict[int, str]
"""Row index in the request -> the message of the row's first problem (column order)."""


def kind(field: FieldSchema) -> str:
    """The field's type, upper-cased, aliases resolved (DECIMAL is NUMERIC, ...)."""
    upper = (field.type or "STRING").upper()
    return _TYPE_ALIASES.get(upper, upper)


def _mode(field: FieldSchema) -> str:
    return (field.mode or "NULLABLE").upper()


def has_rules(field: FieldSchema) -> bool:
    """Whether anything is to be checked in this column (or its members)."""
    if _mode(field) == "REQUIRED":
        return True
    match kind(field):
        case "STRING" | "BYTES":
            return field.max_length is not None
        case "NUMERIC" | "BIGNUMERIC":
            return True
        case "RECORD":
            return any(has_rules(member) for member in field.fields)
    return False


def check_rows(table: pa.Table, fields: Sequence[FieldSchema]) -> tuple[pa.Table, Problems]:
    """Check ``table`` (one append's rows, lined up with the table) against ``fields``
    (the table's columns); return the rows to store and the problems found.

    The rows returned differ only in rounded decimals; when there are problems the
    request is refused whole and they are not stored at all.
    """
    by_name = {field.name: field for field in fields}
    problems: Problems = {}
    for index, name in enumerate(table.column_names):
        field = by_name.get(name)
        if field is None or not has_rules(field):
            continue
        column = table.column(index).combine_chunks()
        checked = _check(column, field, name, _Place(None, None), problems)
        if checked is not column:
            table = table.set_column(index, table.schema.field(index), checked)
    return table, problems


@dataclass(frozen=True)
class _Place:
    """Where an array's values sit: ``rows[i]`` is the request row of value ``i``
    (``None``: value ``i`` is row ``i``), ``present[i]`` whether every RECORD around it
    has a value (``None``: all do), which is when a REQUIRED member must have one."""

    rows: np.ndarray[Any, np.dtype[np.int64]] | None
    present: np.ndarray[Any, np.dtype[np.bool_]] | None

    def request_rows(self, positions: np.ndarray[Any, np.dtype[np.int64]]) -> list[int]:
        picked = positions if self.rows is None else self.rows[positions]
        return [int(row) for row in picked]


def _check(
    array: pa.Array, field: FieldSchema, path: str, place: _Place, problems: Problems
) -> pa.Array:
    """Check one column (or member) and return it as it is to be stored."""
    if _mode(field) == "REPEATED":
        return _check_repeated(array, field, path, place, problems)
    if _mode(field) == "REQUIRED" and array.null_count:
        missing = _as_numpy(array.is_null())
        if place.present is not None:
            missing &= place.present
        message = f"{_field(path)} REQUIRED field has no value (NULL or missing)"
        _report(missing, place, problems, lambda _: message)
    return _check_value(array, field, path, place, problems)


def _check_value(
    array: pa.Array, field: FieldSchema, path: str, place: _Place, problems: Problems
) -> pa.Array:
    """The rules of a single value (a REPEATED column's elements one by one)."""
    match kind(field):
        case "RECORD" if pa.types.is_struct(array.type):
            return _check_record(array, field, path, place, problems)
        case "STRING" | "BYTES" if field.max_length is not None:
            _check_length(array, field, path, place, problems)
        case "NUMERIC" | "BIGNUMERIC" if pa.types.is_decimal(array.type):
            return _check_decimal(array, field, path, place, problems)
    return array


def _check_repeated(
    array: pa.Array, field: FieldSchema, path: str, place: _Place, problems: Problems
) -> pa.Array:
    # A NULL list is an empty array in BigQuery: REPEATED columns have no REQUIRED rule.
    if not isinstance(array, pa.ListArray | pa.LargeListArray):
        return array
    values = array.flatten()
    parents = _as_numpy(pc.list_parent_indices(array)).astype(np.int64)
    rows = parents if place.rows is None else place.rows[parents]
    present = None if place.present is None else place.present[parents]
    checked = _check_value(values, field, path, _Place(rows, present), problems)
    if checked is values:
        return array
    lengths = _as_numpy(pc.fill_null(pc.list_value_length(array), 0)).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offset_type = pa.int64() if isinstance(array, pa.LargeListArray) else pa.int32()
    return type(array).from_arrays(
        pa.array(offsets, offset_type), checked, type=array.type, mask=_null_mask(array)
    )


def _check_record(
    array: pa.StructArray, field: FieldSchema, path: str, place: _Place, problems: Problems
) -> pa.Array:
    members = {member.name: member for member in field.fields}
    children = array.flatten()  # members with the RECORD's own NULLs folded in
    present = place.present
    if array.null_count:
        valid = _as_numpy(array.is_valid())
        present = valid if present is None else present & valid
    inner = _Place(place.rows, present)
    checked_children: list[pa.Array] = []
    for index, child in enumerate(children):
        name = array.type.field(index).name
        member = members.get(name)
        if member is None or not has_rules(member):
            checked_children.append(child)
            continue
        checked_children.append(_check(child, member, f"{path}.{name}", inner, problems))
    if all(new is old for new, old in zip(checked_children, children, strict=True)):
        return array
    return pa.StructArray.from_arrays(
        checked_children, fields=list(array.type), mask=_null_mask(array)
    )


def _check_length(
    array: pa.Array, field: FieldSchema, path: str, place: _Place, problems: Problems
) -> None:
    limit = int(field.max_length or 0)
    if kind(field) == "STRING" and (
        pa.types.is_string(array.type) or pa.types.is_large_string(array.type)
    ):
        lengths, unit = pc.utf8_length(array), "characters"  # STRING(L): L characters
    elif pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        lengths, unit = pc.binary_length(array), "bytes"
    else:
        return
    too_long = _as_numpy(pc.fill_null(pc.greater(lengths, limit), False))
    label = f"{kind(field)}({limit})"
    _report(
        too_long,
        place,
        problems,
        lambda position: (
            f"{_field(path)} {label} value is {lengths[position].as_py()} "
            f"{unit} long, longer than its maximum length {limit}"
        ),
    )


@dataclass(frozen=True)
class _DecimalRule:
    label: str  # NUMERIC(5, 2), NUMERIC(5), NUMERIC
    scale: int
    integer_digits: int | None  # None: no range to check beyond the Arrow type's
    rounding: str  # pyarrow's round_mode


def _decimal_rule(field: FieldSchema) -> _DecimalRule:
    type_name = kind(field)
    rounding = _ROUND_MODES.get((field.rounding_mode or "").upper(), _ROUND_HALF_AWAY_FROM_ZERO)
    if field.precision is not None:
        scale = field.scale or 0  # precision without scale: scale 0
        label = (
            f"{type_name}({field.precision}, {field.scale})"
            if field.scale is not None
            else f"{type_name}({field.precision})"
        )
        return _DecimalRule(label, scale, field.precision - scale, rounding)
    if type_name == "NUMERIC":
        precision, scale = NUMERIC_DEFAULT
        return _DecimalRule(type_name, scale, precision - scale, rounding)
    return _DecimalRule(type_name, BIGNUMERIC_DEFAULT_SCALE, None, rounding)


def _check_decimal(
    array: pa.Array, field: FieldSchema, path: str, place: _Place, problems: Problems
) -> pa.Array:
    rule = _decimal_rule(field)
    arrow_scale = array.type.scale
    arrow_digits = array.type.precision - arrow_scale
    rounds = rule.scale < arrow_scale
    digits = rule.integer_digits
    # Out of range once rounded to the rule's scale <=> |v| >= a threshold: with
    # rounding, 10^D less half a unit of the last digit kept (a tie there rounds up to
    # 10^D in both modes, the bound's last digit being an odd 9); without, 10^D itself.
    # A threshold the Arrow type cannot hold is one no value reaches.
    if digits is not None and (digits < arrow_digits or (rounds and digits == arrow_digits)):
        threshold = f"{10**digits - 1}.{'9' * rule.scale}5" if rounds else str(10**digits)
        bound = pa.scalar(_decimal(threshold), type=array.type)
        out = _as_numpy(pc.fill_null(pc.greater_equal(pc.abs(array), bound), False))
        largest = ("9" * digits or "0") + (f".{'9' * rule.scale}" if rule.scale else "")
        _report(
            out,
            place,
            problems,
            lambda position: (
                f"{_field(path)} {rule.label} value "
                f"{_plain(array[position].as_py())} is out of range [-{largest}, {largest}]"
            ),
        )
        if out.any():
            return array  # the request is refused: nothing to round
    if not rounds:
        return array
    try:
        rounded = pc.round(array, ndigits=rule.scale, round_mode=rule.rounding)
    except pa.ArrowInvalid:
        # Only a value outside BigQuery's range can overflow the Arrow type when
        # rounded, and such a value was reported above.
        return array
    return array if rounded.equals(array) else rounded


def _decimal(text: str) -> Any:
    from decimal import Decimal

    return Decimal(text)  # exact: no context rounding when built from text


def _plain(value: Any) -> str:
    """A decimal as written, without exponent or trailing zeros."""
    text = f"{value:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _field(path: str) -> str:
    return f"Field {path}:"


def _report(
    broken: np.ndarray[Any, np.dtype[np.bool_]],
    place: _Place,
    problems: Problems,
    message: Callable[[int], str],
) -> None:
    """Note ``message`` for each request row whose value breaks the rule, unless an
    earlier column already gave that row its (first) problem."""
    if not broken.any():
        return
    positions = np.flatnonzero(broken)
    for position, row in zip(positions, place.request_rows(positions), strict=True):
        if row not in problems:
            problems[row] = message(int(position))


def _as_numpy(array: pa.Array) -> np.ndarray[Any, Any]:
    return np.asarray(array.to_numpy(zero_copy_only=False))


def _null_mask(array: pa.Array) -> pa.Array | None:
    return array.is_null() if array.null_count else None
