"""Benchmarks: figures printed side by side, as ratios in one run; never timed assertions.

``onceover bench`` (:mod:`onceover_tools.bench.run`) runs them all; ``sink_modes``,
``control_plane`` and ``starvation`` also run on their own with ``python -m``.
"""
