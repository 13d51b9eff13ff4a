"""Training: GAE and the clipped loss, the pipeline that wires every part, the one loop, evaluation."""

from ppo_td.training.callbacks import Callback, StopTraining
from ppo_td.training.evaluation import (
    Evaluation,
    evaluate,
    evaluate_pipeline,
    evaluation_seed,
    final_evaluations,
    load_transform_states,
    make_eval_env,
    run_episodes,
    step_cap,
)
from ppo_td.training.loop import NonFiniteError, TrainResult, run, train, update
from ppo_td.training.objective import (
    FastLoss,
    PPOObjective,
    ValueNorm,
    explained_variance,
    make_advantage,
    make_loss,
    total_loss,
)
from ppo_td.training.pipeline import (
    Pipeline,
    build_pipeline,
    make_buffer,
    make_optimizer,
    make_scheduler,
    make_train_env,
    run_device,
    trained_parameters,
)

__all__ = [
    "Callback",
    "Evaluation",
    "FastLoss",
    "NonFiniteError",
    "PPOObjective",
    "Pipeline",
    "StopTraining",
    "TrainResult",
    "ValueNorm",
    "build_pipeline",
    "evaluate",
    "evaluate_pipeline",
    "evaluation_seed",
    "explained_variance",
    "final_evaluations",
    "make_advantage",
    "make_buffer",
    "load_transform_states",
    "make_eval_env",
    "make_loss",
    "make_optimizer",
    "make_scheduler",
    "make_train_env",
    "run",
    "run_device",
    "run_episodes",
    "step_cap",
    "total_loss",
    "train",
    "trained_parameters",
    "update",
]
