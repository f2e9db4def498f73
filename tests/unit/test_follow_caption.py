"""`captioning.inference.follow_caption`: where a captioning model looks at each word of a caption it is given (teacher
forcing), the maps the Compare tab and the score-function figure line up word by word."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from captioning.bundled import SCORE_MODELS, SHAPES_SOFT
from captioning.inference import UnknownWordsError, follow_caption, generate_caption
from captioning.module import CaptioningModule
from data.shapes_scene import generate_split_scene, render_scene


@pytest.fixture(scope="module")
def scene() -> Image.Image:
    return render_scene(generate_split_scene(0, "test", 3), 224)


@pytest.fixture(scope="module")
def soft() -> CaptioningModule:
    return CaptioningModule.load(SHAPES_SOFT, map_location="cpu")


def test_following_its_own_greedy_caption_gives_the_maps_it_spoke_with(soft, scene):
    """Greedy decoding feeds each word back as the next input, as teacher forcing does: the same words give the
    same attention rows, so a followed caption's maps are the ones the model would have had saying it."""
    words, weights = generate_caption(soft, scene, beam_size=1)
    followed, forced = follow_caption(soft, scene, " ".join(words))
    assert followed == words and len(words) >= 5
    assert forced.shape == weights.shape == (len(words), soft.encoder.num_locations)
    torch.testing.assert_close(forced, weights, atol=1e-5, rtol=0)
    torch.testing.assert_close(forced.sum(dim=1), torch.ones(len(words)))


def test_a_caption_is_read_as_words_whatever_its_case_and_punctuation(soft, scene):
    plain = follow_caption(soft, scene, "a small red cross")
    written = follow_caption(soft, scene, "  A small, RED cross. ")
    assert plain[0] == written[0] == ["a", "small", "red", "cross"]
    torch.testing.assert_close(plain[1], written[1])


def test_words_the_model_does_not_know_are_named_with_the_ones_it_does(soft, scene):
    with pytest.raises(UnknownWordsError) as raised:
        follow_caption(soft, scene, "a small dog beside a dog and a cat")
    assert raised.value.words == [
        "dog",
        "beside",
        "and",
        "cat",
    ]  # each once, in caption order
    assert "'dog', 'beside', 'and', 'cat'" in str(raised.value)
    assert raised.value.known.split(", ") == soft.vocabulary.tokens[4:]  # the words, no <pad>/<start>/<end>/<unk>


@pytest.mark.parametrize(
    ("caption", "problem"),
    [("", "is empty"), ("?! ...", "is empty"), ("a " * 41, "has 41 words")],
)
def test_an_empty_or_overlong_caption_is_refused(soft, scene, caption, problem):
    with pytest.raises(ValueError, match=problem):
        follow_caption(soft, scene, caption)


@pytest.mark.parametrize("name", list(SCORE_MODELS))
def test_only_location_based_attention_gives_the_same_map_over_another_image(score_functions, scene, name):
    """The same query over the cells of two different scenes: a location score, e = W s, never reads the cells, so
    its map is the same to the last bit; every other score function reads them, and its map moves."""
    model = CaptioningModule.load(SCORE_MODELS[name].file, map_location="cpu")
    other = render_scene(generate_split_scene(0, "test", 6), 224)
    on_scene, on_other = score_functions.same_query_over_two_images(model, scene, other)
    moved = (on_scene - on_other).abs().sum().item()  # twice the total variation distance, 0 .. 2
    if name == "shapes-location":
        assert moved == 0.0
    else:
        assert moved > 0.05, name
