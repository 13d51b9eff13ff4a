"""TorchRL PPO-tutorial-shaped PPO on Pendulum-v1 (ProbabilisticActor, Collector, GAE, ClipPPOLoss): a correct host
script for ``ppo-td doctor``."""
import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data.replay_buffers import ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.data.replay_buffers.storages import LazyTensorStorage
from torchrl.envs import Compose, DoubleToFloat, ObservationNorm, StepCounter, TransformedEnv
from torchrl.envs.libs.gym import GymEnv
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

torch.manual_seed(0)
torch.set_num_threads(1)

num_cells, lr, max_grad_norm = 64, 3e-4, 1.0
frames_per_batch, total_frames = 256, 512
sub_batch_size, num_epochs = 64, 2
clip_epsilon, gamma, lmbda, entropy_eps = 0.2, 0.99, 0.95, 1e-4

env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(ObservationNorm(in_keys=["observation"]), DoubleToFloat(),
                                                    StepCounter()))
env.set_seed(0)
env.transform[0].init_stats(num_iter=200, reduce_dim=0, cat_dim=0)

actor_net = nn.Sequential(
    nn.LazyLinear(num_cells), nn.Tanh(),
    nn.LazyLinear(num_cells), nn.Tanh(),
    nn.LazyLinear(2 * env.action_spec.shape[-1]),
    NormalParamExtractor(),
)
policy_module = ProbabilisticActor(
    module=TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
    spec=env.action_spec,
    in_keys=["loc", "scale"],
    distribution_class=TanhNormal,
    distribution_kwargs={"low": env.action_spec_unbatched.space.low, "high": env.action_spec_unbatched.space.high},
    return_log_prob=True,
)
value_net = nn.Sequential(
    nn.LazyLinear(num_cells), nn.Tanh(),
    nn.LazyLinear(num_cells), nn.Tanh(),
    nn.LazyLinear(1),
)
value_module = ValueOperator(module=value_net, in_keys=["observation"])

# one forward each materializes the lazy layers
policy_module(env.reset())
value_module(env.reset())
policy_module.eval()
value_module.eval()

collector = Collector(env, policy_module, frames_per_batch=frames_per_batch, total_frames=total_frames,
                      split_trajs=False)
replay_buffer = ReplayBuffer(storage=LazyTensorStorage(max_size=frames_per_batch),
                             sampler=SamplerWithoutReplacement())
advantage_module = GAE(gamma=gamma, lmbda=lmbda, value_network=value_module, average_gae=True)
loss_module = ClipPPOLoss(
    actor_network=policy_module,
    critic_network=value_module,
    clip_epsilon=clip_epsilon,
    entropy_bonus=bool(entropy_eps),
    entropy_coeff=entropy_eps,
    critic_coeff=1.0,
    loss_critic_type="smooth_l1",
)
optim = torch.optim.Adam(loss_module.parameters(), lr)

for i, tensordict_data in enumerate(collector):
    for _ in range(num_epochs):
        advantage_module(tensordict_data)
        replay_buffer.extend(tensordict_data.reshape(-1))
        for _ in range(frames_per_batch // sub_batch_size):
            subdata = replay_buffer.sample(sub_batch_size)
            loss_vals = loss_module(subdata)
            loss_value = loss_vals["loss_objective"] + loss_vals["loss_critic"] + loss_vals["loss_entropy"]
            loss_value.backward()
            torch.nn.utils.clip_grad_norm_(loss_module.parameters(), max_grad_norm)
            optim.step()
            optim.zero_grad()
    print(f"batch {i}: mean reward {tensordict_data['next', 'reward'].mean().item():.3f}")
collector.shutdown()
print(f"torchrl_tutorial: done, last loss {loss_value.item():.4f}")
