"""Spark jobs written the way a user writes them: their own script, their own session,
``format("onceover")`` where they write. The chaos harness runs them under faults
(``onceover chaos --workload``) and the tests run them as their users would."""
