"""The shapes of BigQuery names that are ever written into SQL text.

Values go into queries as parameters; identifiers cannot, so every table or column
name interpolated into a query (between backticks) must first match one of these. None
of them admits a backtick, a quote, whitespace or a semicolon.
"""

from __future__ import annotations

import re

COLUMN_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,299}$")
"""A top-level column: letters, digits and underscores, not starting with a digit."""

TABLE_ID_RE = re.compile(
    r"^(?P<project>[a-z][a-z0-9.:-]{4,61}[a-z0-9])"
    r"\.(?P<dataset>[A-Za-z0-9_]{1,1024})\.(?P<table>[A-Za-z0-9_-]{1,1024})$"
)
"""``project.dataset.table``, fully qualified; a domain-scoped project
(``example.com:project``) is allowed, partition decorators (``$``) are not."""
