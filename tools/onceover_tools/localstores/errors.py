"""Errors of the local object stores, under the project's :class:`OnceoverError`.

::

    OnceoverError
    └── LocalStoreError           a stand-in could not start, stop or create a bucket
        └── LocalStoreVersionError  the installed Cloud Storage stand-in is not the pinned one

Every message is one line a person can act on, as the command line prints it.
"""

from __future__ import annotations

from onceover.errors import OnceoverError


class LocalStoreError(OnceoverError):
    """A local object store (the S3 or the Cloud Storage stand-in) failed to start, stop
    or create a bucket."""


class LocalStoreVersionError(LocalStoreError):
    """The installed gcp-storage-emulator is not the release the patches were written for."""
