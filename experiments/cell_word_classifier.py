"""How well can any map read from an encoder's grid point at the objects words name? A bound for the decoder's maps.

A class activation map (Zhou et al., CVPR 2016) for caption words: one linear classifier per object word over every
grid cell, pooled by the mean over the cells, trained on a caption dataset's cached grids to say which words a
photo's captions use (multiple-instance learning, no boxes). Its map for a word, softmax over the cells of that word's
per-cell logits, is what the grid itself can show of the word. The script then scores that map, in place of the
attention, on the object words of a captioner's captions of photos with boxes (`captioning.grounding`), and prints
the attention's own figures beside it. The classifier is trained at the encoder's own image size; the grounding
photos are read at every size of `--sizes` (the classifier's weights apply to any grid).

    python experiments/cell_word_classifier.py --root PATH/TO/flickr8k --images PATH/TO/coco-boxes/images \
        --boxes PATH/TO/coco-boxes/boxes.json [--words FILE] [--sizes "[224,384]"]

Prints each epoch's training loss, then one JSON object: the captioner's own attention (`attention`: its image size,
pairs, mass inside the named object's boxes, pointing, the centre point's pointing) and, per size of `--sizes`, the
classifier's maps on the same pairs (`classifier`: size, grid, pairs, mass, pointing; null figures where no pair is
left to score).

About 4 minutes on one core once the Flickr8k feature cache of the training photos is built (the training
`fit` builds it; otherwise this script builds it first, about 10 minutes).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F
from jsonargparse import auto_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from captioning.grounding import DEFAULT_WORDS, ObjectWords, ground, load_captioner, score_pair  # noqa: E402
from core.maps.grounding import Mention  # noqa: E402
from core.model.encoder import EfficientNetLite  # noqa: E402
from core.training.features import FeatureCache  # noqa: E402
from data.boxes import read_boxes  # noqa: E402
from data.images import load_image  # noqa: E402
from data.karpathy import KarpathyCaptions  # noqa: E402
from data.vocabulary import tokenize  # noqa: E402


def word_targets(captions: list[tuple[str, ...]], words: list[str]) -> torch.Tensor:
    """(N, W): the share of each photo's captions that use each word."""
    index = {word: i for i, word in enumerate(words)}
    targets = torch.zeros(len(captions), len(words))
    for row, references in enumerate(captions):
        for caption in references:
            for word in set(tokenize(caption)) & index.keys():
                targets[row, index[word]] += 1.0 / len(references)
    return targets


def main(
    *,
    root: Path,
    images: Path,
    boxes: Path,
    words: Path = DEFAULT_WORDS,
    model: str = "flickr8k-soft",
    sizes: list[int] = [224, 384],  # noqa: B006 (jsonargparse reads the default)
    epochs: int = 12,
    learning_rate: float = 3e-3,
    cache_dir: Path = Path(".cache/features"),
    seed: int = 0,
) -> None:
    """Train the per-cell word classifier on `root`'s training photos and score its maps on photos with boxes.

    Args:
        root: a Karpathy-layout caption dataset (Flickr8k).
        images: the folder of the photos with boxes.
        boxes: their boxes file (data.boxes).
        words: the word list of each box class (captioning/object_words.json's layout).
        model: the captioner whose captions give the words to score (a bundled name or a checkpoint).
        sizes: the image sizes the photos with boxes are read at.
        epochs: passes over the training photos.
        learning_rate: Adam's.
        cache_dir: the feature cache (the training fit's, to reuse its grids).
        seed: torch's seed.
    """
    torch.manual_seed(seed)
    object_words = ObjectWords.read(words)
    vocabulary = sorted({tokens[0] for tokens in object_words.phrases if len(tokens) == 1})
    dataset = KarpathyCaptions(root=root)
    samples = dataset.samples("train")
    encoder = EfficientNetLite()
    grids = torch.from_numpy(
        FeatureCache(root=cache_dir).load_or_build(
            dataset_name=dataset.name, split="train", image_ids=[s.image_id for s in samples],
            image_files=[s.path for s in samples], load_image=lambda i: dataset.load(samples[i]), encoder=encoder,
        )[:]
    ).float()  # (N, L, D)
    targets = word_targets([s.captions for s in samples], vocabulary)  # (N, W)
    seen = (targets > 0).sum(dim=0) >= 5  # words of at least 5 training photos
    classifier = torch.nn.Linear(encoder.feature_dim, len(vocabulary))
    optimizer = torch.optim.Adam(classifier.parameters(), lr=learning_rate)
    for epoch in range(epochs):
        order = torch.randperm(len(grids))
        for start in range(0, len(order), 64):
            batch = order[start : start + 64]
            logits = classifier(grids[batch]).mean(dim=1)  # (B, W): the mean of the cells' logits (CAM)
            loss = F.binary_cross_entropy_with_logits(logits, targets[batch], reduction="none")
            loss = (loss * seen).sum() / len(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch + 1}: training loss {loss.item():.3f}", flush=True)

    captioner = load_captioner(model)
    photos = read_boxes(boxes)
    report = ground(captioner, photos, images, words=object_words, model_name=model)
    by_file = {photo.file: photo for photo in photos}
    pairs_of: dict[str, list] = defaultdict(list)  # the pairs of each photo whose word the classifier knows
    for pair in report.pairs:
        word = report.captions[pair.photo].split()[pair.position]  # the phrase's last word, whose map is scored
        if word in vocabulary:
            pairs_of[pair.photo].append((pair, vocabulary.index(word)))
    means = report.means()
    attention = {"size": captioner.model.encoder.input_shape[0], "pairs": means["pairs"]} | {
        name: round(means[name], 4) if means["pairs"] else None for name in ("mass", "pointing", "centre")
    }
    classified = []
    classifier.eval()
    for size in sizes:
        reader = EfficientNetLite(image_size=size).eval()
        transform, (rows, columns) = reader.transform(), reader.grid_shape
        scores = []
        with torch.no_grad():
            for file, pairs in pairs_of.items():
                logits = classifier(reader(transform(load_image(images / file))[None])[0])  # (L, W)
                for pair, column in pairs:
                    cam = torch.softmax(logits[:, column], dim=0).reshape(rows, columns)
                    scores.append(score_pair(cam, by_file[file], Mention(pair.position, pair.word, frozenset(pair.classes))))
        count = len(scores)
        classified.append({
            "size": size, "grid": [rows, columns], "pairs": count,
            "mass": round(sum(s.mass for s in scores) / count, 4) if count else None,
            "pointing": round(sum(s.pointed for s in scores) / count, 4) if count else None,
        })  # fmt: skip
    print(json.dumps({"model": model, "attention": attention, "classifier": classified}))


if __name__ == "__main__":
    try:
        auto_cli(main, as_positional=False)
    except (FileNotFoundError, ValueError) as error:  # a missing dataset, photo folder, boxes or words file
        sys.exit(f"error: {error}")
