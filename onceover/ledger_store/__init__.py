"""The storage a ledger lives on, behind one interface: a mounted disk, Cloud Storage,
S3 or Azure. :mod:`.base` says what the ledger needs of it (read, list, create if absent,
replace if unchanged, delete) and :mod:`.location` which store serves a path or a URL;
the stores are :mod:`.posix`, :mod:`.gcs` and :mod:`.objects`. Nothing outside this
package knows which store it writes to."""

from onceover.ledger_store.base import (
    REQUEST_KINDS,
    LedgerStore,
    Listing,
    RequestCounts,
    Stored,
    Sync,
    join,
)
from onceover.ledger_store.location import (
    ACCEPTED,
    OBJECT_SCHEMES,
    StoreLike,
    check_location,
    is_object_store,
    open_store,
    scheme_of,
    under,
)

__all__ = [
    "ACCEPTED",
    "OBJECT_SCHEMES",
    "REQUEST_KINDS",
    "LedgerStore",
    "Listing",
    "RequestCounts",
    "StoreLike",
    "Stored",
    "Sync",
    "check_location",
    "is_object_store",
    "join",
    "open_store",
    "scheme_of",
    "under",
]
