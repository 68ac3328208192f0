"""gRPC's fork handlers off in every process of ours, before anything imports grpc.

PySpark starts the driver's JVM with ``Popen(..., preexec_fn=...)`` (``launch_gateway``
ignores SIGINT in the child), so the child runs Python's after-fork hooks before it
execs ``spark-submit``. grpcio registers fork handlers there; in a process where other
threads are inside gRPC at that moment (a gRPC server such as the in-process local
BigQuery, or any live channel), the child aborts (SIGABRT) before ``exec``. PySpark
sees the JVM gone before it wrote its port and raises ``JAVA_GATEWAY_EXITED``, with no
JVM output at all: the JVM never ran.

Measured on 2 cores, ``Popen(["/bin/true"], preexec_fn=...)`` beside an idle
in-process local BigQuery: 21 of 3,510 children died of SIGABRT; beside one serving
three busy clients, 57 of 4,340. With ``GRPC_ENABLE_FORK_SUPPORT=0`` set before grpc
was imported: 0 of 5,157. Without ``preexec_fn`` (how our own child processes start):
0 of 22,008. ``tests/contract/test_fork_safety.py`` pins both sides.

The variable is read when grpc is imported, so it is set when ``onceover`` is (the
``jobs`` and ``tests`` packages import ``onceover`` first). Nothing here needs gRPC
across a fork: Spark's worker daemon forks its workers before any channel exists, and
each worker opens its own. An explicit value in the environment is left alone.
"""

from __future__ import annotations

import os

GRPC_FORK_SUPPORT_ENV = "GRPC_ENABLE_FORK_SUPPORT"


def keep_grpc_out_of_forks() -> None:
    """Turn gRPC's fork handlers off for this process and its children, unless the
    environment already says otherwise. Too late once grpc has been imported."""
    os.environ.setdefault(GRPC_FORK_SUPPORT_ENV, "0")
