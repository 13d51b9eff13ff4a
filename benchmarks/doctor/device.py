"""The doctor on a GPU: the gallery's TorchRL loop (examples/doctor/torchrl_entropy_subtracted.py) run on a device,
plain and under the audit. Prints what the audit found and whether the two runs end with the same weights and random
state, bit for bit (the audit must change no number, on CUDA as on the CPU).

    python -m benchmarks doctor_device --device cuda
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import runpy
import sys
import time
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "doctor" / "torchrl_entropy_subtracted.py"


def _run(device: str, audited: bool) -> tuple[dict, dict, float]:
    from ppo_td.doctor import audit

    saved = sys.argv, list(sys.path)
    sys.argv, sys.path[:0] = [str(SCRIPT), device], [str(SCRIPT.parent)]
    start = time.perf_counter()
    try:
        with (audit() if audited else contextlib.nullcontext()) as a, contextlib.redirect_stderr(io.StringIO()):
            scope = runpy.run_path(str(SCRIPT), run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved
    seconds = time.perf_counter() - start
    weights = {f"{name}.{k}": v.detach().cpu().clone() for name in ("policy", "critic")
               for k, v in scope[name].state_dict().items()}
    report = a.to_dict() if audited else {}
    return weights, {"report": report, "rng": torch.get_rng_state(),
                     "cuda_rng": torch.cuda.get_rng_state() if torch.cuda.is_available() else None}, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    plain, plain_state, plain_s = _run(args.device, False)
    audited, audited_state, audited_s = _run(args.device, True)
    same = plain.keys() == audited.keys() and all(torch.equal(v, audited[k]) for k, v in plain.items())
    findings = [(f["item"], f["title"], f["made"]) for f in audited_state["report"]["findings"]]
    print(json.dumps({"device": args.device, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                      "findings": findings, "weights_bit_for_bit": same,
                      "rng_same": torch.equal(plain_state["rng"], audited_state["rng"]),
                      "cuda_rng_same": None if plain_state["cuda_rng"] is None else torch.equal(
                          plain_state["cuda_rng"], audited_state["cuda_rng"]),
                      "plain_s": round(plain_s, 2), "audited_s": round(audited_s, 2)}, indent=1))


if __name__ == "__main__":
    main()
