"""A loop on TorchRL's own objects (Collector, GAE, ClipPPOLoss) that subtracts the loss's loss_entropy term: the
entropy is then minimized. The actor's TanhNormal has no closed-form entropy, so ClipPPOLoss estimates it from
samples; the doctor judges the term by the loss's gradient with respect to it, whatever the estimate.

    ppo-td doctor examples/doctor/torchrl_entropy_subtracted.py [DEVICE]
"""

import sys

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import GymEnv
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cpu")
torch.manual_seed(0)
env = GymEnv("Pendulum-v1", device=device)
env.set_seed(0)
actor_net = nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 2), NormalParamExtractor()).to(device)
policy = ProbabilisticActor(TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
                            in_keys=["loc", "scale"], spec=env.action_spec, distribution_class=TanhNormal,
                            distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)
critic = ValueOperator(nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 1)).to(device),
                       in_keys=["observation"])
collector = Collector(env, policy, frames_per_batch=128, total_frames=256)
advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
loss_module = ClipPPOLoss(policy, critic, entropy_coeff=0.01)
optim = torch.optim.Adam(loss_module.parameters(), lr=3e-4)

for batch in collector:
    advantage(batch)
    for minibatch in batch.reshape(-1).split(32):
        loss_vals = loss_module(minibatch)
        loss = loss_vals["loss_objective"] + loss_vals["loss_critic"] - loss_vals["loss_entropy"]  # the mistake
        optim.zero_grad()
        loss.backward()
        optim.step()
collector.shutdown()
