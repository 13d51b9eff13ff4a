#!/usr/bin/env bash
# One command for a lent GPU machine (the device tool; ../shared/gpu/README.md): the wheels in .whl/ installed
# (bash ../shared/gpu/wheels.sh fills it where pip works), then the CUDA tests and `benchmarks gpu`'s compile runs
# (eager on the CPU, then eager, compile and CUDA graphs on the GPU), each under a timeout of its own, printing as
# they go; the table lands in $OUT/gpu (bench_results/gpu where OUT is unset). About 8 minutes.
#   bash benchmarks/gpu/lent.sh [FRAMES]
set -uo pipefail
[ -f pyproject.toml ] || { echo "run this from the project root" >&2; exit 2; }
ls .whl/*.whl > /dev/null 2>&1 || { echo "no wheels in .whl/: run bash ../shared/gpu/wheels.sh where pip works" >&2; exit 2; }
frames=${1:-100000}
out=${OUT:-bench_results}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "installing .whl/ failed" >&2; exit 2; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
date -u +%FT%TZ
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: none"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
echo "== tests/test_device.py (CUDA tests included)"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_device.py 2>&1 | tail -20
preset=halfcheetah
python3 -c "import mujoco" 2> /dev/null || preset=pendulum  # the GPU image has no MuJoCo unless its wheels came
echo "== python -m benchmarks gpu, compile runs: preset $preset, $frames frames"
timeout 420 python3 -m benchmarks gpu --vmas-envs --atari-frames 0 --compile-preset "$preset" \
  --compile-frames "$frames" --timeout 150 --out "$out/gpu"
