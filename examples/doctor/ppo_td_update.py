"""ppo_td's own update (collector, GAE, ClipPPOLoss with the fast paths, optimizer): a clean bill.

    ppo-td doctor examples/doctor/ppo_td_update.py
"""

import torch

from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, update

torch.manual_seed(0)
pipeline = build_pipeline(get_preset("cartpole"))
for _, batch in zip(range(2), pipeline.collector, strict=False):
    with torch.no_grad():
        pipeline.advantage(batch)
    update(pipeline, batch)
pipeline.collector.shutdown()
