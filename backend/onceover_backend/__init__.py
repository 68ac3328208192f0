"""The Onceover control plane: a FastAPI service that watches the sink.

``onceover_backend.main.create_app`` builds the application; ``onceover serve`` runs it.
"""
