"""``onceover demo``: the whole product on one machine, in a few minutes.

It starts the local BigQuery and the backend (with the dashboard), generates order
events, and loads them four times side by side into four tables, one story each:

- ``orders_clean``: a clean run, reconciled ``ok``;
- ``orders_faults``: the same load through a fault proxy (dropped responses, an
  UNAVAILABLE burst, an offset gap), so ALREADY_EXISTS and OUT_OF_RANGE show on its
  charts, and still exactly the generated rows in BigQuery;
- ``orders_crashed``: crashed at ``commit.after``, left failed for the dashboard's
  Resume button;
- ``orders_tampered``: loaded cleanly, then a row is copied behind its back with a
  DML INSERT, and reconciliation says ``mismatch``.

Then alert rules with a webhook endpoint on a receiver the demo runs itself, and the
dashboard is served until Ctrl-C. :mod:`onceover_tools.demo.run` puts the steps in order.
"""
