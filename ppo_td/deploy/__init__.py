"""Using a trained policy: :func:`load_policy` -> :class:`Policy` (raw observations in, env actions out),
:func:`export_policy` (TorchScript, ``torch.export``, ONNX files that run without ppo_td) and videos
(:func:`record_video`).

A layer above ``persist`` (it reads checkpoints) and below ``cli``.
"""

from ppo_td.deploy.agents import AgentsPolicy, TeamPolicy
from ppo_td.deploy.policy import Layout, Policy, load_policy, policy_of

__all__ = ["AgentsPolicy", "Layout", "Policy", "TeamPolicy", "load_policy", "policy_of"]
