"""TorchRL sota-implementations/ppo (ppo_mujoco.py + utils_mujoco.py)-shaped PPO on Pendulum-v1: make_env and
make_ppo_models helpers, a state-independent scale, GAE under no_grad once per epoch, two grouped Adams and a
hand-annealed learning rate. A correct host script for ``ppo-td doctor``."""
import torch
from tensordict import TensorDict
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import (
    ClipTransform,
    DoubleToFloat,
    ExplorationType,
    RewardSum,
    StepCounter,
    TransformedEnv,
    VecNormV2,
    set_exploration_type,
)
from torchrl.envs.libs.gym import GymEnv
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss, group_optimizers
from torchrl.objectives.value.advantages import GAE

CFG = dict(env_name="Pendulum-v1", frames_per_batch=256, total_frames=512, mini_batch_size=64, ppo_epochs=2,
           lr=3e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, critic_coeff=0.25,
           entropy_coeff=1e-3, loss_critic_type="l2", test_max_steps=50)


def make_env(env_name="Pendulum-v1", device="cpu"):
    env = TransformedEnv(GymEnv(env_name, device=device))
    env.append_transform(VecNormV2(in_keys=["observation"], decay=0.99999, eps=1e-2))
    env.append_transform(ClipTransform(in_keys=["observation"], low=-10, high=10))
    env.append_transform(RewardSum())
    env.append_transform(StepCounter())
    if env.observation_spec["observation"].dtype is torch.float64:
        env.append_transform(DoubleToFloat(in_keys=["observation"]))
    return env


def make_ppo_models_state(proof_environment, device="cpu"):
    input_shape = proof_environment.observation_spec["observation"].shape
    num_outputs = proof_environment.action_spec_unbatched.shape[-1]
    distribution_kwargs = {"low": proof_environment.action_spec_unbatched.space.low,
                           "high": proof_environment.action_spec_unbatched.space.high, "tanh_loc": False}

    policy_mlp = MLP(in_features=input_shape[-1], activation_class=torch.nn.Tanh, out_features=num_outputs,
                     num_cells=[64, 64], device=device)
    for layer in policy_mlp.modules():
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.orthogonal_(layer.weight, 1.0)
            layer.bias.data.zero_()
    policy_mlp = torch.nn.Sequential(policy_mlp, AddStateIndependentNormalScale(num_outputs, scale_lb=1e-8))
    policy_module = ProbabilisticActor(
        TensorDictModule(module=policy_mlp, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=proof_environment.full_action_spec_unbatched,
        distribution_class=TanhNormal,
        distribution_kwargs=distribution_kwargs,
        return_log_prob=True,
        default_interaction_type=ExplorationType.RANDOM,
    )

    value_mlp = MLP(in_features=input_shape[-1], activation_class=torch.nn.Tanh, out_features=1,
                    num_cells=[64, 64], device=device)
    for layer in value_mlp.modules():
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.orthogonal_(layer.weight, 0.01)
            layer.bias.data.zero_()
    value_module = ValueOperator(value_mlp, in_keys=["observation"])
    return policy_module, value_module


def make_ppo_models(env_name, device="cpu"):
    proof_environment = make_env(env_name, device=device)
    actor, critic = make_ppo_models_state(proof_environment, device=device)
    proof_environment.close()
    return actor, critic


def eval_model(actor, test_env, num_episodes=1, max_steps=50):
    test_rewards = []
    for _ in range(num_episodes):
        td_test = test_env.rollout(policy=actor, auto_reset=True, break_when_any_done=True, max_steps=max_steps)
        test_rewards.append(td_test["next", "reward"].sum().view(1))
    return torch.cat(test_rewards, 0).mean()


def main(cfg):
    device = torch.device("cpu")
    num_mini_batches = cfg["frames_per_batch"] // cfg["mini_batch_size"]
    total_network_updates = (cfg["total_frames"] // cfg["frames_per_batch"]) * cfg["ppo_epochs"] * num_mini_batches

    actor, critic = make_ppo_models(cfg["env_name"], device=device)

    train_env = make_env(cfg["env_name"], device)
    train_env.set_seed(0)
    collector = Collector(create_env_fn=train_env, policy=actor, frames_per_batch=cfg["frames_per_batch"],
                          total_frames=cfg["total_frames"], device=device, max_frames_per_traj=-1)

    sampler = SamplerWithoutReplacement()
    data_buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(cfg["frames_per_batch"], device=device),
                                         sampler=sampler, batch_size=cfg["mini_batch_size"])

    adv_module = GAE(gamma=cfg["gamma"], lmbda=cfg["gae_lambda"], value_network=critic, average_gae=False,
                     device=device)
    loss_module = ClipPPOLoss(
        actor_network=actor,
        critic_network=critic,
        clip_epsilon=cfg["clip_epsilon"],
        loss_critic_type=cfg["loss_critic_type"],
        entropy_coeff=cfg["entropy_coeff"],
        critic_coeff=cfg["critic_coeff"],
        normalize_advantage=True,
    )

    actor_optim = torch.optim.Adam(actor.parameters(), lr=cfg["lr"], eps=1e-5)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=cfg["lr"], eps=1e-5)
    optim = group_optimizers(actor_optim, critic_optim)
    del actor_optim, critic_optim

    test_env = make_env(cfg["env_name"], device)
    test_env.set_seed(1)
    test_env.eval()

    def update(batch, num_network_updates):
        optim.zero_grad(set_to_none=True)
        alpha = 1.0
        if cfg["anneal_lr"]:
            alpha = 1 - num_network_updates / total_network_updates
            for group in optim.param_groups:
                group["lr"] = cfg["lr"] * alpha
        num_network_updates = num_network_updates + 1

        loss = loss_module(batch)
        critic_loss = loss["loss_critic"]
        actor_loss = loss["loss_objective"] + loss["loss_entropy"]
        total_loss = critic_loss + actor_loss
        total_loss.backward()

        optim.step()
        return loss.detach().set("alpha", torch.tensor(alpha)), num_network_updates

    collected_frames = 0
    num_network_updates = 0
    losses = TensorDict(batch_size=[cfg["ppo_epochs"], num_mini_batches])
    collector_iter = iter(collector)
    for i in range(len(collector)):
        data = next(collector_iter)
        collected_frames += data.numel()

        for j in range(cfg["ppo_epochs"]):
            with torch.no_grad():
                data = adv_module(data)
            data_reshape = data.reshape(-1)
            data_buffer.extend(data_reshape)

            for k, batch in enumerate(data_buffer):
                loss, num_network_updates = update(batch, num_network_updates)
                losses[j, k] = loss.select("loss_critic", "loss_entropy", "loss_objective")

        losses_mean = losses.apply(lambda x: x.float().mean(), batch_size=[])
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            actor.eval()
            test_reward = eval_model(actor, test_env, max_steps=cfg["test_max_steps"])
            actor.train()
        print(f"iteration {i}: {collected_frames} frames, loss_objective {losses_mean['loss_objective'].item():.4f}, "
              f"test reward {test_reward.item():.2f}")
        collector.update_policy_weights_()

    collector.shutdown()
    if not test_env.is_closed:
        test_env.close()
    print("torchrl_sota: done")
    return actor, critic


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    actor, critic = main(CFG)
