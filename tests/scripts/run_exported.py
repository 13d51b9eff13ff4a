"""Run an exported policy file with nothing of ppo_td, tensordict or TorchRL: plain torch or onnxruntime.

    python run_exported.py FORMAT FILE INPUTS.npz OUTPUTS.npz

INPUTS.npz holds ``in{i}`` arrays of shape ``[steps, batch, ...]`` (observations and mask) and ``state{j}`` (a
recurrent file's initial state); each step's outputs after the first (the next state) are fed back as the state.
OUTPUTS.npz gets ``action`` (``[steps, batch, ...]``).
"""

import sys

import numpy as np
import torch

fmt, path, inputs_path, outputs_path = sys.argv[1:5]
data = np.load(inputs_path)
inputs = [data[f"in{i}"] for i in range(sum(k.startswith("in") for k in data.files))]
state = [data[f"state{j}"] for j in range(sum(k.startswith("state") for k in data.files))]
if fmt == "onnx":
    import onnxruntime

    session = onnxruntime.InferenceSession(path)
    names = [i.name for i in session.get_inputs()]

    def run(args):
        return session.run(None, dict(zip(names, args, strict=True)))
else:
    module = torch.jit.load(path) if fmt == "torchscript" else torch.export.load(path).module()

    def run(args):
        with torch.no_grad():
            out = module(*[torch.from_numpy(a) for a in args])
        return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]
actions = []
for t in range(inputs[0].shape[0]):
    out = run([x[t] for x in inputs] + state)
    actions.append(out[0])
    state = list(out[1:])
loaded = sorted(m for m in ("ppo_td", "tensordict", "torchrl") if m in sys.modules)
assert not loaded, f"the exported file needed {loaded}"
np.savez(outputs_path, action=np.stack(actions))
