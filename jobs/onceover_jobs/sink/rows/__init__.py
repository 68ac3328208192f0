"""The rows a task sends: the DataFrame's columns planned against the table's schema and
converted, encoded for the wire, stamped, tallied by key, and the rows BigQuery refuses.

:mod:`.plan` and :mod:`.schema` (what each column becomes; checked on the driver) →
:mod:`.datetime_text` (DATETIME from strings, read when a request is encoded) →
:mod:`.proto_rows` and :mod:`.proto_encoder` (the proto row format) → :mod:`.stamp` (run and
batch columns) → :mod:`.key_tally` (a batch's key checksum and tally) →
:mod:`.dead_letter` (refused rows named, or set aside exactly once: invariant 9).
"""
