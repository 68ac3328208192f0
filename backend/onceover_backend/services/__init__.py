"""The control plane's work, by concern; routes and the background loops call it.

Each folder holds one concern and imports only what stands below it: ``ingest`` and
``reconciliation`` are the heart, ``resume`` launches runs again through ``launch``,
``alerts`` deliver through ``webhooks``, ``reads`` answer the dashboard, ``access`` holds
the tokens and the audit log. ``paging`` and ``periodic`` serve them all; ``retention``
sweeps what each stored.
"""
