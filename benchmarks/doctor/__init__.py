"""The doctor's benchmarks: what its audit costs and what it finds. ``python -m benchmarks doctor`` (``suite.py``: the
audit's cost per update on two presets), ``doctor_overhead`` (``overhead.py``: that cost in one run, side by side),
``doctor_matrix`` (``matrix.py``: which classic PPO mistakes it finds in differently written scripts, at which line)
and ``doctor_device`` (``device.py``: the doctor on a GPU)."""
