"""Onceover's tools: the ``onceover`` command line (:mod:`onceover_tools.cli`), the local
BigQuery launcher (:mod:`onceover_tools.localbq`), the demo, chaos and every benchmark
(:mod:`onceover_tools.bench`). They import both planes; neither plane imports them.
"""
