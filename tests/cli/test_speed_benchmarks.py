"""The speed benchmarks of docs/performance.md, each run end to end as the docs run it, at the smallest size that
takes its whole path (both decoder paths, both attention modes, a child process per setting, the timing, the JSON
line): every key the docs read is there and every figure is a finite number, so a script that breaks fails here,
not in the next person's measurement. The figures themselves are the docs' business, not the tests'."""

from __future__ import annotations

import math
import operator

import pytest
from PIL import Image

from tests.helpers import assert_printed_result, figures_of, rounding_error, run_benchmark

pytestmark = pytest.mark.slow


def assert_finite(answer: dict) -> None:
    figures = figures_of(answer)
    assert figures and all(math.isfinite(value) for value in figures.values()), figures


def assert_rates(summary: dict) -> None:
    """A median/min/max/n summary of rates from n timings: positive, ordered."""
    assert summary["n"] >= 1 and 0 < summary["min"] <= summary["median"] <= summary["max"]


def test_beam_search_times_both_paths() -> None:
    answer = run_benchmark(
        "beam_search.py", "--grids", "2", "--beams", "2", "--path", "fast", "readable", "--images", "2", "--length", "3",
        "--warmup", "0", "--repeats", "1",
    )
    assert_finite(answer)
    assert answer["benchmark"] == "beam_search" and answer["images"] == 2 and answer["steps"] == 3
    for path in ("fast", "readable"):
        setting = answer["results"][path]["beam2_2x2"]
        assert_rates(setting["images_per_s"])
        assert 0 < setting["cpu_share"] <= 1.05
        assert answer["goal_met"][path] == {"beam2_2x2": None}  # no goal for a 2x2 grid
    assert {"cpu", "goal", "all_goals_met", "sizes", "precision"} <= answer.keys()


def test_decoder_training_times_a_training_step_in_a_child_process() -> None:
    """Soft attention here; the matmul test below runs a hard-attention step (the harness is the same)."""
    answer = run_benchmark(
        "decoder_training.py", "--grids", "2", "--attention", "soft", "--path", "fast", "--batch-size", "2",
        "--words", "3", "--warmup", "0", "--steps", "1", "--repeats", "1",
    )
    assert_finite(answer)
    figures = answer["results"]["fast"]["soft_2x2"]
    assert_rates(figures["captions_per_s"])
    assert 0 < figures["setup_rss_mib"] <= figures["peak_rss_mib"]
    assert {"cpu", "goal", "goal_met", "all_goals_met", "memory", "timing"} <= answer.keys()


def test_matmul_efficiency_counts_a_steps_flops_and_compares_them_with_a_plain_product() -> None:
    answer = run_benchmark(
        "matmul_efficiency.py", "--grids", "2", "--attention", "hard", "--batch-size", "2", "--words", "3",
        "--warmup", "0", "--steps", "1", "--repeats", "1", "--mm-repeats", "1",
    )
    assert_finite(answer)
    step = answer["results"]["hard_2x2"]
    assert step["flops_per_step"] == sum(step["by_op"].values()) > 0
    # efficiency is the step's achieved rate over the plain product's, each printed rounded
    achieved, matmul = (step["achieved_gflops"], 1), (answer["matmul_gflops"]["median"], 1)
    assert_printed_result(step["efficiency"], 3, operator.truediv, achieved, matmul)
    goal = answer["goal"]["efficiency"]
    if abs(step["efficiency"] - goal) > rounding_error(3):  # the goal is judged on the unrounded efficiency
        assert answer["goal_met"]["hard_2x2"] == (step["efficiency"] >= goal)


def test_feature_extraction_times_the_cache_build_beside_the_bare_encoder(tmp_path) -> None:
    for index, size in enumerate([(160, 120), (90, 200), (64, 64)]):
        Image.new("RGB", size, (40 * index, 90, 200)).save(tmp_path / f"photo{index}.jpg")
    answer = run_benchmark("feature_extraction.py", "--images", str(tmp_path), "--bare-batches", "1", "--repeats", "1")
    assert_finite(answer)
    assert answer["images"] == 3 and answer["bare_images"] == 3
    pipeline, bare = (answer["pipeline_images_per_s"], 1), (answer["bare_images_per_s"]["median"], 1)
    assert_printed_result(answer["ratio"], 3, operator.truediv, pipeline, bare)
    assert {"pipeline_images_per_s", "loading_images_per_s", "cpu_share", "goal", "goal_met"} <= answer.keys()


def test_fine_tuning_times_the_cached_trunk_against_images() -> None:
    answer = run_benchmark(
        "fine_tuning.py", "--variant", "0", "--image-size", "64", "--trainable-blocks", "1", "--batch-size", "2",
        "--warmup", "0", "--repeats", "1",
    )
    assert_finite(answer)
    top = answer["results"]["top1"]
    assert_rates(top["cached_steps_per_s"]) and assert_rates(top["images_steps_per_s"])
    assert top["trunk_per_image"]["shape"] == [4, 192]  # 64 px: a 2x2 grid of the 192-channel trunk


def test_python_api_gives_the_same_captions_batched_and_one_by_one() -> None:
    answer = run_benchmark("python_api.py", "--images", "3", "--photos", "shapes", "--batch-size", "2", "--beam-size", "2")
    assert_finite(answer)
    assert answer["same_captions"] == 1.0
    assert answer["batched"]["images"] == answer["one_by_one"]["images"] == 3
    assert answer["batched"]["images_per_s"] > 0 and answer["one_by_one"]["images_per_s"] > 0


def test_score_functions_speed_times_every_bundled_score_model() -> None:
    answer = run_benchmark("score_functions.py", "speed", "--steps", "1", "--repeats", "1")
    assert_finite(answer)
    scores = [row["score"] for row in answer["speed"]]
    assert len(scores) == 6 and "additive" in scores and "scaled dot product" in scores
    for row in answer["speed"]:
        assert_rates(row["captions_per_s"])


def test_decoders_times_a_show_attend_tell_and_a_transformer_checkpoint_in_one_run(tmp_path) -> None:
    from functools import partial

    import torch

    from captioning.decoder import ShowAttendTell
    from captioning.module import CaptioningModule
    from captioning.transformer import TransformerDecoder

    words = ["<pad>", "<start>", "<end>", "<unk>", "a", "dog", "runs"]
    paths, sizes = [], {}
    for decoder in (partial(ShowAttendTell, embed_dim=8, decoder_dim=8, attention_dim=8),
                    partial(TransformerDecoder, model_dim=8, layers=1, heads=2, feedforward_dim=8)):  # fmt: skip
        model = CaptioningModule(decoder=decoder, vocabulary=words, max_length=5)
        path = tmp_path / f"{decoder.func.__name__}.ckpt"
        torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
        paths.append(str(path))
        sizes[decoder.func.__name__] = sum(p.numel() for p in model.decoder.parameters())
    answer = run_benchmark(
        "decoders.py", "--models", *paths, "--batch-size", "4", "--words", "3", "--images", "3", "--warmup", "0",
        "--repeats", "2",
    )  # fmt: skip
    assert [row["decoder"] for row in answer["models"]] == ["ShowAttendTell", "TransformerDecoder"]
    for row in answer["models"]:
        assert row["parameters"] == sizes[row["decoder"]]
        assert row["grid"] == [7, 7] and row["beam_size"] == 3 and row["training_captions_per_s"]["n"] == 2
        per_s = (row["training_captions_per_s"]["median"], 1)
        assert_printed_result(row["epoch_minutes"], 1, lambda rate: 30000 / rate / 60, per_s)
    for name, value in figures_of(answer).items():
        assert math.isfinite(value) and value >= 0, name


def test_encoder_layout_times_both_layouts_on_the_same_features() -> None:
    answer = run_benchmark("encoder_layout.py", "--sizes", "64", "--batches", "1", "--repeats", "1")
    assert_finite(answer)
    result = answer["results"]["64px_batch1"]
    assert result["default_layout_ms"] > 0 and result["channels_last_ms"] > 0
    # the times are printed to 0.1 ms, the speedup to 0.01 from the unrounded times
    default, channels_last = (result["default_layout_ms"], 1), (result["channels_last_ms"], 1)
    assert_printed_result(result["speedup"], 2, operator.truediv, default, channels_last)
    assert result["max_difference"] < 1e-3  # the same features up to float rounding
