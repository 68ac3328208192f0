"""The Onceover control plane: a FastAPI service that watches the sink.

``onceover_backend.main.create_app`` builds the application; ``python -m onceover_backend
serve`` (or ``onceover serve``) runs it (:mod:`onceover_backend.commands`). It imports
the contract (:mod:`onceover`), never the data plane: it reads the sink's ledger through
:mod:`onceover.ledger_files`.
"""
