"""The TensorDict keys that form ppo_td's data contract, in one place.

They are TorchRL's default names. The log-prob key is not listed: read it from
``loss.tensor_keys.sample_log_prob`` (TorchRL chooses it, see TORCHRL_FACTS 7).
"""

OBSERVATION = "observation"
ACTION = "action"
LOGITS = "logits"
LOC = "loc"
SCALE = "scale"
ACTION_NOISE = "action_noise"  # a gSDE policy's state-dependent noise (ppo_td.models.gsde)
HIDDEN = "hidden"
STATE_VALUE = "state_value"
ADVANTAGE = "advantage"
VALUE_TARGET = "value_target"
REWARD = ("next", "reward")
DONE = ("next", "done")
TERMINATED = ("next", "terminated")
TRUNCATED = ("next", "truncated")
EPISODE_RETURN = ("next", "episode_reward")  # written by torchrl's RewardSum
EPISODE_LENGTH = ("next", "step_count")  # written by torchrl's StepCounter
