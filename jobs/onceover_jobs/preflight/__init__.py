"""Checks run before a job writes: ``onceover check``, and a write given ``check=true``.

Each asks what the job itself will ask, with the job's own options and credentials, and
says ``ok``, ``warn`` or ``fail`` with the reason and the fix (:mod:`.report`):

- :mod:`.credentials` — the credentials load and get a token; the project they name.
- :mod:`.location` — the dataset exists, its location, the Storage Write endpoint for it.
- :mod:`.permissions` — ``tables.testIamPermissions``: what the write needs on the table,
  or on its dataset when the write would create it.
- :mod:`.ledger` — the ledger's store takes a create-if-absent (and refuses a second),
  a probe removed after.
- :mod:`.arrow` — BigQuery takes an Arrow append: one row on a PENDING stream never
  committed (it expires, unseen).
- :mod:`.shape` — the job's partitions, trigger and batch size against BigQuery's
  limits: streams created per hour, connections at once, pending bytes per commit.

:mod:`.run` runs them in that order; the CLI (``onceover_tools.cli``) prints its report
and the sink's driver (``onceover_jobs.sink.datasource.prepare_job``) refuses a write
whose report fails, before anything is created or written.
"""
