"""Encoders: one observation (any Gymnasium space) -> a float feature vector the MLP heads read.

Each encoder is a plain ``nn.Module`` built from the env's
:class:`~ppo_td.envs.description.ObservationSpace`, with an ``out_features`` attribute. It takes
observations with any leading batch dims (``[batch]`` from the collector, ``[env, time]`` in GAE,
``[minibatch]`` in the loss), runs on them flattened to ``[N, ...]`` and returns
``[*batch, out_features]``.

=================  ==========================================================================
observation        default encoder (``model.encoder='auto'``)
=================  ==========================================================================
float vector       none: the MLP reads it as it is
other numbers      :class:`Flatten`: cast to float, flattened (an N-D float ``Box``, an int ``Box``)
``Discrete``       :class:`OneHot`
``MultiDiscrete``  :class:`OneHot`, one per entry, concatenated (``MultiBinary`` is cast: 0/1)
image              ``uint8`` scaled by 1/255 (pixels; ``model.scale_images=False`` reads symbolic images
                   as they are), HWC moved to CHW, then :class:`NatureCNN` from 36x36 up (Mnih et al.
                   2015; CleanRL's Atari network), :class:`SmallCNN` below
``Dict``/``Tuple``  :class:`DictEncoder`: each entry encoded as above, concatenated in key order
=================  ==========================================================================

Replace any of them: ``model.encoder`` takes 'flat' (no CNN), 'nature', 'small', or the import path
``module:function`` of ``function(space) -> nn.Module``; from Python pass ``encoder=function`` to
:func:`~ppo_td.models.make_actor_critic` (or ``build_pipeline``/``train``). The function may call
:func:`make_encoder` for the entries it does not handle itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from ppo_td.envs.description import ObservationSpace

EncoderFactory = Callable[[ObservationSpace], nn.Module]

NATURE_MIN_SIZE = 36
"""Smallest height and width the Nature CNN takes (8x8 stride 4, 4x4 stride 2, 3x3 stride 1)."""


def _leading(x: torch.Tensor, event_dims: int) -> tuple[torch.Size, torch.Tensor]:
    """The batch dims of ``x`` (all but its last ``event_dims``) and ``x`` with them flattened to one."""
    lead = x.shape[: x.dim() - event_dims]
    return lead, x.reshape(-1, *x.shape[x.dim() - event_dims:])


class Flatten(nn.Module):
    """Numbers of any shape -> a float vector (cast, flattened)."""

    def __init__(self, space: ObservationSpace) -> None:
        super().__init__()
        self.event_dims = len(space.shape)
        self.out_features = math.prod(space.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead, flat = _leading(x, self.event_dims)
        return flat.reshape(flat.shape[0], -1).to(torch.get_default_dtype()).reshape(*lead, self.out_features)


class OneHot(nn.Module):
    """Indices -> one-hot vectors, one per index, concatenated (``Discrete``: one index, ``MultiDiscrete``: many)."""

    def __init__(self, space: ObservationSpace) -> None:
        super().__init__()
        if space.nvec is None:
            raise ValueError(f"OneHot needs a discrete observation, got {space}")
        self.event_dims = len(space.shape)
        self.nvec = tuple(space.nvec)
        self.register_buffer("offsets", torch.tensor([0, *itertools.accumulate(self.nvec)][:-1]), persistent=False)
        self.out_features = sum(self.nvec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead, flat = _leading(x, self.event_dims)
        index = flat.reshape(flat.shape[0], -1).long() + self.offsets  # [N, entries]: positions in the output
        zeros = torch.zeros(index.shape[0], self.out_features, device=x.device)
        return zeros.scatter(1, index, 1.0).reshape(*lead, self.out_features)  # out of place: vmap-safe (GAE)


class _ImageInput(nn.Module):
    """An image batch as float ``[N, C, H, W]``: ``uint8`` scaled by 1/255, HWC moved to CHW, 2-D given a channel.

    The layout is CHW when the first dim is the smallest (stacked frames: ``[4, 84, 84]``), else HWC
    (Gymnasium's convention: ``[7, 7, 3]``); ``channels_last`` overrides it. ``scale_images=False`` casts a
    ``uint8`` image without scaling it: a symbolic image, whose entries are small indices (MiniGrid's object,
    colour and state, 0-10), which 1/255 would shrink under 0.04 (SB3's ``normalize_images=False``).
    """

    def __init__(self, space: ObservationSpace, channels_last: bool | None = None, scale_images: bool = True) -> None:
        super().__init__()
        shape = space.shape
        self.event_dims = len(shape)
        if len(shape) == 2:
            self.channels_last, (h, w), c = False, shape, 1
        else:
            self.channels_last = shape[0] >= shape[-1] if channels_last is None else channels_last
            (h, w, c) = shape if self.channels_last else (shape[1], shape[2], shape[0])
        self.channels, self.height, self.width = c, h, w
        self.scale = 1.0 / 255.0 if space.dtype == "uint8" and scale_images else 1.0

    def forward(self, x: torch.Tensor) -> tuple[torch.Size, torch.Tensor]:
        lead, flat = _leading(x, self.event_dims)
        img = flat.to(torch.get_default_dtype())
        if self.scale != 1.0:
            img = img.mul_(self.scale)  # uint8 only: the cast made a new tensor
        if self.event_dims == 2:
            img = img.unsqueeze(1)
        elif self.channels_last:
            img = img.permute(0, 3, 1, 2)
        return lead, img


class _CNN(nn.Module):
    """Convolutions, then a ReLU linear layer of ``features`` outputs; orthogonal init, gain sqrt(2)."""

    def __init__(self, space: ObservationSpace, convs: nn.Sequential, features: int, scale_images: bool) -> None:
        super().__init__()
        self.input = _ImageInput(space, scale_images=scale_images)
        self.convs = convs
        with torch.no_grad():
            probe = torch.zeros(1, self.input.channels, self.input.height, self.input.width)
            flat = int(self.convs(probe).numel())
        self.linear = nn.Sequential(nn.Linear(flat, features), nn.ReLU())
        self.out_features = features
        for layer in self.modules():
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.orthogonal_(layer.weight, math.sqrt(2))
                nn.init.zeros_(layer.bias)
        # channels-last convolutions: about a quarter less time forward and backward on CPU (docs/fast-paths.md)
        self.convs.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead, img = self.input(x)
        channels_last = img.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)  # (vmap-safe) channels-last strides
        out = self.linear(self.convs(channels_last).flatten(1))
        return out.reshape(*lead, self.out_features)


class NatureCNN(_CNN):
    """The DQN/PPO Atari network (Mnih et al. 2015; CleanRL's ``ppo_atari.py``): 32 8x8/4, 64 4x4/2, 64 3x3/1,
    then 512 ReLU units. Takes images of at least 36x36 (:data:`NATURE_MIN_SIZE`); ``uint8`` ones scaled by
    1/255 unless ``scale_images`` is False."""

    def __init__(self, space: ObservationSpace, features: int = 512, scale_images: bool = True) -> None:
        c, h, w = image_size(space)
        if min(h, w) < NATURE_MIN_SIZE:
            raise ValueError(f"the Nature CNN takes images of at least {NATURE_MIN_SIZE}x{NATURE_MIN_SIZE}; this "
                             f"observation is {h}x{w} ({space}). Use model.encoder='small' (or 'auto')")
        convs = nn.Sequential(nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                              nn.Conv2d(64, 64, 3, stride=1), nn.ReLU())
        super().__init__(space, convs, features, scale_images)


class SmallCNN(_CNN):
    """For small grids (MiniGrid's 7x7, MinAtar's 10x10): 16 and 32 3x3 convolutions (padded, stride 1), then
    256 ReLU units. Takes images of at least 3x3; ``uint8`` ones scaled by 1/255 unless ``scale_images`` is False
    (MiniGrid's symbolic 7x7x3)."""

    def __init__(self, space: ObservationSpace, features: int = 256, scale_images: bool = True) -> None:
        c, h, w = image_size(space)
        if min(h, w) < 3:
            raise ValueError(f"the small CNN takes images of at least 3x3; this observation is {h}x{w} ({space}). "
                             "Use model.encoder='flat'")
        convs = nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        super().__init__(space, convs, features, scale_images)


def image_size(space: ObservationSpace) -> tuple[int, int, int]:
    """An image space's channels, height and width (HWC or CHW, as ppo_td reads it)."""
    reader = _ImageInput(space)
    return reader.channels, reader.height, reader.width


class DictEncoder(nn.Module):
    """A ``Dict``/``Tuple`` observation: each entry by its own encoder (``None``: a float vector read as it
    is), the features concatenated in key order."""

    def __init__(self, encoders: dict[str, nn.Module | None], sizes: dict[str, int]) -> None:
        super().__init__()
        self.keys = sorted(encoders)
        self.encoders = nn.ModuleDict({k: v for k, v in encoders.items() if v is not None})
        self.out_features = sum(sizes.values())

    def forward(self, td: TensorDictBase) -> torch.Tensor:
        parts = [self.encoders[k](td.get(k)) if k in self.encoders else td.get(k) for k in self.keys]
        return torch.cat(parts, dim=-1)


KINDS = ("auto", "flat", "nature", "small")


def make_encoder(space: ObservationSpace, kind: str = "auto", scale_images: bool = True) -> nn.Module | None:
    """The default encoder of ``space`` (see the module docstring); None for a float vector (read as it is).

    ``kind``: 'auto' (Nature CNN for images from 36x36, small CNN below), 'flat' (images flattened too),
    'nature' or 'small' (that CNN for every image). ``scale_images``: whether a CNN scales ``uint8`` images by
    1/255 (pixels) or reads them as they are (symbolic images: MiniGrid's indices).

    Raises:
        ValueError: an image too small for the chosen CNN (naming the minimum), or 'nature'/'small' for an
            observation without images.
    """
    if kind not in KINDS:
        raise ValueError(f"encoder {kind!r}: use one of {KINDS} or a module:function import path")
    if kind in ("nature", "small") and not space.images():
        raise ValueError(f"model.encoder={kind!r} needs an image observation; this one is {space}. Use 'auto'")
    return _encoder(space, kind, scale_images)


def _encoder(space: ObservationSpace, kind: str, scale_images: bool) -> nn.Module | None:
    if space.kind == "dict":
        encoders = {key: _encoder(entry, kind, scale_images) for key, entry in space.entries}
        return DictEncoder(encoders, {k: features(e, dict(space.entries)[k]) for k, e in encoders.items()})
    if space.is_flat_float:
        return None
    if space.kind in ("discrete", "multi_discrete"):
        return OneHot(space)
    if space.kind == "image" and kind != "flat":
        h, w = image_size(space)[1:]
        if kind == "nature" or (kind == "auto" and min(h, w) >= NATURE_MIN_SIZE):
            return NatureCNN(space, scale_images=scale_images)
        if kind == "small" or min(h, w) >= 3:
            return SmallCNN(space, scale_images=scale_images)
    return Flatten(space)  # numbers of any other shape; with 'auto', also "images" under 3x3 (a (5, 2) mask)


def features(encoder: nn.Module | None, space: ObservationSpace) -> int:
    """Outputs of ``encoder`` on ``space`` (its ``out_features``; a float vector's size without one)."""
    if encoder is None:
        return math.prod(space.shape)
    out = getattr(encoder, "out_features", None)
    if not isinstance(out, int) or isinstance(out, bool) or out < 1:
        raise ValueError(f"the encoder {type(encoder).__name__} for {space} has no positive int out_features "
                         "attribute: set it to the size of the feature vector it returns")
    return out


def zeros(space: ObservationSpace, batch: int = 2) -> torch.Tensor | TensorDict:
    """A batch of ``batch`` all-zero observations of ``space`` (to probe an encoder)."""
    if space.kind == "dict":
        return TensorDict({k: zeros(v, batch) for k, v in space.entries}, batch_size=[batch])
    return torch.zeros(batch, *space.shape, dtype=getattr(torch, space.dtype))


def check_encoder(encoder: nn.Module, space: ObservationSpace) -> int:
    """Run ``encoder`` on zero observations of ``space``; its ``out_features``, once its output matches it.

    Raises:
        ValueError: the encoder fails on the observation, or returns another shape (the message says which).
    """
    size = features(encoder, space)
    training = encoder.training
    try:
        encoder.eval()  # the probe must not move running statistics (BatchNorm) or draw dropout masks
        with torch.no_grad():
            out = encoder(zeros(space))
    except Exception as err:
        raise ValueError(f"the encoder {type(encoder).__name__} fails on a batch of zero observations of {space}: "
                         f"{type(err).__name__}: {err}") from err
    finally:
        encoder.train(training)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, size) or not out.dtype.is_floating_point:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"the encoder {type(encoder).__name__} returns {got} for 2 observations of {space}; an "
                         f"encoder returns float [*batch, out_features] = (2, {size})")
    return size
