#!/usr/bin/env bash
# One command for a lent GPU machine (the device tool; ../shared/gpu/README.md): the wheels in .whl/ installed
# (bash ../shared/gpu/wheels.sh fills it where pip works; .whl/ is git-excluded, so the device call carries it:
# carry [".whl"]), then the CUDA tests, `benchmarks gpu`'s pinned-memory moves (Atari's and Pendulum's batch and step:
# pinned.md) and its compile runs (eager on the CPU, then eager, compile and CUDA graphs on the GPU), each step
# under a timeout of its own that together fit the device tool's 600 s a call, printing as
# they go; the tables land in $OUT/gpu (bench_results/gpu where OUT is unset), rewritten after every run.
# Exit status: 0 when every step passed, else 1 (the steps after a failed one still run). Under 10 minutes.
#   bash benchmarks/gpu/lent.sh [FRAMES]
set -uo pipefail
[ -f pyproject.toml ] || { echo "run this from the project root" >&2; exit 2; }
ls .whl/*.whl > /dev/null 2>&1 || { echo "no wheels in .whl/: run bash ../shared/gpu/wheels.sh where pip works" >&2; exit 2; }
frames=${1:-50000}
out=${OUT:-bench_results}
rc=0
timeout 60 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl || { echo "installing .whl/ failed" >&2; exit 2; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
date -u +%FT%TZ
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: none"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
echo "== tests/test_device.py (CUDA tests included)"
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_device.py || rc=1
echo "== python -m benchmarks gpu, pinned memory: Atari's and Pendulum's batch and step moves"
timeout 60 python3 -m benchmarks gpu --vmas-envs --atari-frames 0 --compile-frames 0 --pinned-presets atari pendulum \
  --pinned-rounds 20 --timeout 50 --out "$out/gpu" || rc=1
preset=halfcheetah
python3 -c "import mujoco" 2> /dev/null || preset=pendulum  # wheels.sh brings no MuJoCo: the lent image has none
echo "== python -m benchmarks gpu, compile runs: preset $preset, $frames frames"
timeout 330 python3 -m benchmarks gpu --vmas-envs --atari-frames 0 --pinned-presets --compile-preset "$preset" \
  --compile-frames "$frames" --timeout 80 --out "$out/gpu" || rc=1
exit $rc
