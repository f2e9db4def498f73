"""The Gradio app: caption a photo or ask a question about it, and see where the model looked.

    python demo.py                      # then open http://127.0.0.1:7860
    python demo.py --host 0.0.0.0 --port 8080 --caption-model mine=runs/.../best.ckpt
    python demo.py --max-queue 16           # at most 16 requests waiting; more get a "busy" message

Three tabs. "Caption": a photo, a captioning model, a beam width (and for a Transformer, which layer's and head's
cross-attention to draw) -> the caption and one attention overlay per word (titled with the word and how concentrated its attention is: "dog: 62% on top 5%"), then (a
moment later: it is written after the page has them) a zip of the export folder
(`captioning.Caption.save`'s files: overlays, grid, GIF, JSON).
"Ask": a photo, a VQA model and a question -> the top answers (as words: "tissue roll", not DAQUAR's label
`tissue_roll`) with their probabilities and one overlay per attention hop (`vqa.Answer.save`), titled
the same way; its examples pick the model they were made for along with the picture and the question.
"Compare": a group of models, a photo and, optionally, a caption to follow -> each model's caption and word overlays
side by side: the six small ShapesWorld models, one per attention score function (`core.model.attention`), or the two
Flickr8k decoders, Show-Attend-Tell and the Transformer (`COMPARE_GROUPS`); with a caption to follow every model is
teacher-forced on it (`captioning.Captioner.follow`), so the rows of maps line up word by word. Every
overlay is drawn on one fixed scale (`core.maps.overlays.FixedScale`), which a legend under each gallery explains.
The default models are the bundled ones (`captioning.bundled`, `vqa.bundled`): captioning trained on Flickr8k
photos and on ShapesWorld scenes, VQA on DAQUAR's indoor photos and on ShapesWorld; any checkpoint of the
project can be given instead. Every tab goes through `captioning.Captioner` and `vqa.Answerer`, as a Python user
does: the app adds the page, not another way to run the models.

A request to the Ask or Compare tab first empties the tab's answers, and a question of a kind the chosen model was
never trained on ("is there a dog?" to the DAQUAR model) is refused with the kinds it answers
(`vqa.questions.QuestionScope`, declared in `vqa.bundled.QUESTION_SCOPES`).

Offline by construction: analytics (and with them Gradio's version check) are off before Gradio is imported,
the theme's fonts are served by the app itself, nothing is shared, and the server binds to 127.0.0.1
unless told otherwise. Uploads are opened by `data.images.load_image`, never by Gradio, so every unreadable
file (not an image, truncated, a decompression bomb) becomes a message in the page that names the problem,
and every readable one (16-bit, CMYK, palette, transparent, grayscale, camera-rotated) works. A refused request
(a bad upload, question or setting) is a message in the page and one line in the terminal, never a traceback;
those are kept for real faults.

Stopping the app, with Ctrl-C or `kill` (SIGTERM), leaves nothing behind: its work folder, which holds Gradio's
own copies of uploads and results too, is deleted on the way out.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # before gradio is imported: no telemetry, no version check
# The app's files (example pictures, each request's exports) and Gradio's own copies of uploads and results go
# into this one folder, deleted when the process exits, so stopping the app leaves nothing behind. Gradio reads
# GRADIO_TEMP_DIR when it is imported (and again whenever a component is made), hence here, before the import.
WORK_DIR = Path(tempfile.mkdtemp(prefix="visual-attention-demo-"))
atexit.register(shutil.rmtree, WORK_DIR, ignore_errors=True)
os.environ.setdefault("GRADIO_TEMP_DIR", str(WORK_DIR / "gradio"))

import logging
import re
import signal
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

import gradio as gr
import skimage.data
from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import PositiveInt
from PIL import Image

from captioning.bundled import CAPTION_CHECKPOINTS, COMPARE_CHECKPOINTS, DECODER_CHECKPOINTS
from captioning.bundled import MODELS as CAPTION_MODELS
from captioning.inference import HeadChoice, UnknownWordsError
from captioning.naming import DEFAULT_NAMING
from captioning.overlays import CaptionOverlays
from captioning.pretrained import Captioner
from core.model.imagenet import Tag
from core.model.pretrained import PretrainedModel
from core.maps.measures import TOP_AREA, short_share
from core.maps.overlays import FixedScale
from data.images import ImageLoadError, ImageProblem, load_image
from data.shapes_scene import generate_split_scene, render_scene
from vqa.answers import answer_words
from vqa.bundled import DAQUAR_SAN, FLICKR8K_QA_SAN, MODELS, QUESTION_SCOPES, SHAPES_SAN, VQA_CHECKPOINTS
from vqa.pretrained import Answerer
from vqa.questions import (
    QuestionError,
    QuestionScope,
    empty_question_message,
    example_question,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
MAX_BEAM_SIZE = 10
DEFAULT_BEAM_SIZE = 3
TOP_ANSWERS = 5
# Photos are worked on as a copy whose longest side is at most this: the models see 224 px anyway, and
# overlays at a 12-megapixel photo's own size would take seconds per word to draw and to send.
WORK_SIZE = 1024
MAX_UPLOAD = "50mb"
# What Gradio's copies of uploads and results (and the exports) may take on disk, all together: beyond it the oldest
# files go first. An app served to a network can otherwise be filled at MAX_UPLOAD a request.
DEFAULT_MAX_CACHE_MB = 1024
CACHE_SWEEP_S = 2.0  # how often the bound is checked
TINY_SIDE = 32  # a picture with a side shorter than this gets a note that it is too small to say anything about
MAX_PIXELS = 50_000_000  # larger pictures are refused from their header, before decoding (decompression bombs)
PICTURE_SUFFIXES = frozenset({".png", ".gif", ".jpg", ".jpeg"})  # stored in the export zip, not deflated
EXPORT_MAX_AGE_S = 15 * 60  # an answer's files are deleted this long after (the page has its own copies)
# Requests waiting at most, all tabs together (one of each tab runs meanwhile). One more is refused at once
# with Gradio's busy message instead of queueing without bound: 64 holds 50 people waiting with one request
# each (benchmarks/app_load.py), about half a minute's wait at the Caption tab's half a second per request.
DEFAULT_MAX_QUEUE = 64
# Real photos from scikit-image and ShapesWorld test scenes (what the bundled ShapesWorld models were trained on).
# scikit-image's photos; the first is the README's screenshot: the default captioner names its tripod, a word the
# Flickr8k captions never had ("a woman is playing with a camera on a tripod": the photographer is a man)
PHOTO_EXAMPLES = ("camera", "coffee", "astronaut", "chelsea")
SCENE_EXAMPLES = (3, 1, 6)  # indices of ShapesWorld test scenes (seed 0)
# (example picture, the checkpoint the question was made for, question): picking one also picks its model, shown
# only when the app has that checkpoint loaded (under any name). A model's first question here is the one the app
# suggests to a user of it who asks nothing.
QUESTION_EXAMPLES = (
    ("camera", FLICKR8K_QA_SAN, "what is the man holding?"),  # a camera
    ("astronaut", FLICKR8K_QA_SAN, "what is the color of the flag?"),  # red
    ("coffee", DAQUAR_SAN, "what is on the table?"),
    ("scene_3", SHAPES_SAN, "what colour is the circle?"),
    ("scene_1", SHAPES_SAN, "what shape is the large object?"),
    ("scene_6", SHAPES_SAN, "how many objects are there?"),
)
# What a person is told about an upload the image loader refused, by the kind of problem; `{name}` is the name the
# file was uploaded with. The loader's own messages are for Python users (paths, max_pixels, PIL's reasons).
UPLOAD_PROBLEMS = {
    ImageProblem.NOT_AN_IMAGE: "{name} is not a picture this app can read: upload a photo saved as JPEG, PNG, GIF, "
    "WebP, BMP or TIFF.",
    ImageProblem.CORRUPT: "{name} is damaged or incomplete (it may have been cut short while it was saved or "
    "uploaded): upload it again, or another copy of it.",
    ImageProblem.TOO_LARGE: f"{{name}} is too large: this app takes pictures of up to {MAX_PIXELS // 1_000_000} "
    "megapixels. Upload a smaller copy.",
    ImageProblem.UNSUPPORTED_MODE: "{name} stores its colours in a way this app cannot read: save it as an ordinary "
    "JPEG or PNG and upload it again.",
}
UPLOAD_PROBLEM = "{name} could not be read: upload it again, or another picture."  # any other kind of problem

log = logging.getLogger("demo")


@dataclass(frozen=True)
class CompareGroup:
    """Captioning models the Compare tab sets side by side: its title (the tab's choice), what the page says about
    them (Markdown), and their checkpoints by the name each row shows, in order."""

    title: str
    about: str
    checkpoints: Mapping[str, Path]


COMPARE_GROUPS = (
    CompareGroup(
        "six score functions (ShapesWorld)",
        "The same small ShapesWorld captioning model trained six times, once with each way of scoring attention "
        "(`core.model.attention`): **additive** v^T tanh(W_h h + W_s s), **dot** s^T h, "
        "**scaled dot** s^T h / sqrt(n), **general** s^T W h, **cosine** cos(s, h), and **location-based** W s, "
        "which never reads the image. They know only ShapesWorld's scenes of coloured shapes and their few words: on a "
        "photo they still name shapes and colours, and often repeat a word (\"a large large square square\"); try "
        "them on the ShapesWorld examples.",
        COMPARE_CHECKPOINTS,
    ),
    CompareGroup(
        "two decoders (Flickr8k photos)",
        "The same EfficientNet-Lite0 encoder (Show-Attend-Tell reads the photo at 384 px, a 12x12 grid; the "
        "Transformer at 224 px, 7x7), data and vocabulary, read by two decoders: **Show-Attend-Tell**, an LSTM "
        "whose state scores each cell additively, one map per word; and a **Transformer**, whose words attend to "
        "the cells through scaled dot-product cross-attention, softmax(QK^T / sqrt(d_k)) V, drawn here as its second "
        "layer's map averaged over its heads, the layer that points best (the Caption tab shows any layer and head).",
        DECODER_CHECKPOINTS,
    ),
)
"""The Compare tab's choices, the first shown first; `build_app(compare_groups=...)` takes others."""


Upload = Mapping[str, Any] | None  # an image component's raw value: {"path", "orig_name", ...}, or None
Gallery = list[tuple[str, str]]  # (picture path, title) pairs, as gr.Gallery shows them
Example = tuple[str, str, str]  # (example picture, model name, question), a row of the Ask tab's examples


# -- models and files ------------------------------------------------------------------------------------------


def load_models(
    caption_checkpoints: Mapping[str, Path], vqa_checkpoints: Mapping[str, Path]
) -> tuple[dict[str, Captioner], dict[str, Answerer]]:
    """Every captioning model and every VQA model by its name: on the CPU, in eval mode, loaded once. A checkpoint
    that is not a file is named before any model is loaded (FileNotFoundError), not after the others have been."""
    for path in (*caption_checkpoints.values(), *vqa_checkpoints.values()):
        if not Path(path).is_file():
            raise FileNotFoundError(f"checkpoint not found: {path}")
    captioners = {name: Captioner.from_checkpoint(path) for name, path in caption_checkpoints.items()}
    answerers = {name: Answerer.from_checkpoint(path) for name, path in vqa_checkpoints.items()}
    return captioners, answerers


def stop_on_sigterm() -> None:
    """Make `kill` (SIGTERM) stop the served app as Ctrl-C does: Gradio closes its server on the interruption and
    the process exits normally, so the atexit clean-up of WORK_DIR runs (Python's default for SIGTERM skips it)."""

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second kill would interrupt the server's closing
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def question_examples(vqa_checkpoints: Mapping[str, Path]) -> list[Example]:
    """The rows of QUESTION_EXAMPLES whose checkpoint the app has loaded, with the name it has there."""
    names = {Path(path).resolve(): name for name, path in vqa_checkpoints.items()}
    return [
        (picture, names[checkpoint.resolve()], question)
        for picture, checkpoint, question in QUESTION_EXAMPLES
        if checkpoint.resolve() in names
    ]


def question_scopes(vqa_checkpoints: Mapping[str, Path]) -> dict[str, QuestionScope]:
    """The question scope (`vqa.bundled.QUESTION_SCOPES`) of each checkpoint the app has loaded that is a bundled
    model's, by the name it has there; the others (a user's own) have none and are asked every question."""
    scopes = {MODELS[model].file.resolve(): scope for model, scope in QUESTION_SCOPES.items()}
    return {name: scopes[key] for name, path in vqa_checkpoints.items() if (key := Path(path).resolve()) in scopes}


def write_examples(folder: Path) -> dict[str, Path]:
    """Write the example pictures into `folder`: scikit-image's photos as JPEG and a few ShapesWorld test
    scenes as PNG; returns their paths by name ("coffee", "scene_1", ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name in PHOTO_EXAMPLES:
        paths[name] = folder / f"{name}.jpg"
        Image.fromarray(getattr(skimage.data, name)()).save(paths[name], quality=92)
    for index in SCENE_EXAMPLES:
        paths[f"scene_{index}"] = folder / f"shapesworld_test_{index}.png"
        render_scene(generate_split_scene(0, "test", index), 224).save(paths[f"scene_{index}"])
    return paths


def fresh_folder(root: Path, max_age_s: float = EXPORT_MAX_AGE_S) -> Path:
    """A new empty folder under `root` for one request, after deleting the request folders older than
    `max_age_s` (Gradio has copied their files to its own cache by then)."""
    root.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - max_age_s
    for old in root.iterdir():
        if old.is_dir() and old.stat().st_mtime < cutoff:
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(dir=root))


def zip_folder(folder: Path, archive: Path) -> Path:
    """`archive`, a zip of every file in `folder`, stored under the folder's own name. Pictures (PNG, GIF,
    JPEG) are compressed already and go in as they are (deflating them again saved under 0.1% and took 0.2 s
    for a 20-word caption of a 640x480 photo); the other files (caption.json) are deflated."""
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                method = zipfile.ZIP_STORED if path.suffix.lower() in PICTURE_SUFFIXES else zipfile.ZIP_DEFLATED
                bundle.write(path, Path(folder.name) / path.relative_to(folder), compress_type=method)
    return archive


def safe_stem(name: str) -> str:
    """A file name's stem reduced to letters, digits, '-' and '_' (for folder and archive names)."""
    return re.sub(r"[^\w-]+", "_", Path(name).stem).strip("_")[:60] or "image"


# -- request handling -------------------------------------------------------------------------------------------


def refusal(message: str) -> gr.Error:
    """The error to raise for an expected refusal (a bad upload, question or setting): Gradio shows `message` in
    the page and, as print_exception=False, prints no traceback; the terminal gets this one line instead."""
    log.warning("request refused: %s", message)
    return gr.Error(message, print_exception=False)


def uploaded_image(upload: Upload) -> tuple[Image.Image, str]:
    """The uploaded picture as upright RGB (at most WORK_SIZE a side) and the name it was uploaded with.

    `upload` is the image component's raw value (the events run with preprocess=False, so Gradio never
    opens the file itself): a dict with the server-side "path" and the "orig_name", or None.

    Raises:
        gr.Error: nothing was uploaded, or `load_image` could not read the file; the message says what is wrong
            in UPLOAD_PROBLEMS' words, naming the file as the user called it.
    """
    if not upload:
        raise refusal("No image: upload a photo (or pick an example) first.")
    path = Path(upload["path"])
    name = upload.get("orig_name") or path.name
    try:
        image = load_image(path, max_pixels=MAX_PIXELS)
    except ImageLoadError as error:
        raise refusal(UPLOAD_PROBLEMS.get(error.problem, UPLOAD_PROBLEM).format(name=name)) from None
    image.thumbnail((WORK_SIZE, WORK_SIZE))
    return image, name


def warn_if_tiny(image: Image.Image, name: str, model_size: tuple[int, int]) -> None:
    """A note in the page (and a line in the terminal) when a picture is too small to say anything about: under
    `TINY_SIDE` pixels a side, the model sees it enlarged many times to its `model_size` (height, width) input, and
    still answers as confidently as ever."""
    if min(image.size) < TINY_SIDE:
        notice = (
            f"{name} is only {image.width}x{image.height} pixels: the model sees it enlarged to "
            f"{model_size[1]}x{model_size[0]}, so what it says tells little about the picture. Try a larger photo."
        )
        log.info("%s", notice)
        gr.Warning(notice)


def beam_width(value: Any) -> int:
    """The slider's value as a beam width, checked here because API callers can send anything."""
    whole = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
    if not whole or not 1 <= value <= MAX_BEAM_SIZE:
        raise refusal(f"The beam size must be a whole number from 1 to {MAX_BEAM_SIZE}, got {value!r}.")
    return int(value)


def loaded_once(loaded: dict[Path, Captioner], path: Path) -> Captioner:
    """The captioner of the model in `path`, loaded unless `loaded` (by resolved path) has it already, and kept
    there: the Compare tab shares the Caption tab's models (inference only, so one copy serves both)."""
    key = Path(path).resolve()
    if key not in loaded:
        loaded[key] = Captioner.from_checkpoint(path)
    return loaded[key]


def chosen(models: Mapping[str, Any], name: Any) -> Any:
    """The model the radio button named, checked here because API callers can send anything."""
    model = models.get(name) if isinstance(name, str) else None
    if model is None:
        raise refusal(f"Unknown model {name!r}: choose one of {', '.join(map(repr, models))}.")
    return model


OVERLAY_TITLE = re.compile(r"(?P<label>.+): (?P<share>\d+)% on top (?P<area>\d+)%")  # what overlay_title writes


OWN_MAP = -1  # the Caption tab's "Map" value for the map a model's search records (for a Transformer, its map_layer)


def map_choices(captioner: Captioner) -> list[tuple[str, int]]:
    """The Caption tab's "Map" choices for a model, (label, value): its own map (OWN_MAP), then every layer's and
    head's (`Captioner.head_choices`, by index); none for Show-Attend-Tell, which has one map per word."""
    choices = captioner.head_choices()
    if not choices:
        return []
    own = captioner.own_head
    return [(f"{own.label} (the model's own)", OWN_MAP), *((c.label, i) for i, c in enumerate(choices))]


def head_choice(captioner: Captioner, value: Any) -> HeadChoice | None:
    """The map a "Map" value names for this model: None for OWN_MAP (or no value); refused with a message that says
    what it may be otherwise."""
    if value is None or value == OWN_MAP:
        return None
    choices = captioner.head_choices()
    if not choices:
        raise refusal("This model has one map per word: choose no map (its own), or a Transformer model.")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(choices):
        raise refusal(
            f"The map must be {OWN_MAP} (the model's own) or a number from 0 to {len(choices) - 1}, got {value!r}."
        )
    return choices[value]


def overlay_title(label: str, share: float) -> str:
    """An overlay's title in a gallery: what it shows (a word, "hop 2") and how concentrated its attention is,
    "dog: 62% on top 5%" (`core.maps.measures.short_share`)."""
    return f"{label}: {short_share(share)}"


@dataclass(frozen=True)
class CaptionAnswer:
    """What the Caption tab answers, in the page and to an API caller of `/caption`: the caption, one overlay per word
    in caption order, each titled `overlay_title(word, share)`, and the export zip (None in the first of the two
    answers, sent before the zip is written). Clients check an answer against this one description
    (`from_api`, then `problem`): the load and latency benchmarks and the tests do, so a change here changes them."""

    text: str
    pictures: tuple[str | None, ...]  # the overlays' files (paths, or URLs when a client did not download them)
    titles: tuple[str | None, ...]
    archive: str | None
    tags: str = ""  # the line under the caption: what the encoder's ImageNet head found (`tags_line`)

    @classmethod
    def from_api(cls, result: object) -> CaptionAnswer:
        """An answer as `gradio_client` returns it: (text, [{"image": file, "caption": title}, ...], file or None,
        tags line), a file being a path, or a dict with its "url" (or "path") when the client does not download
        files. ValueError when the answer is not of that form."""

        def file_of(value: object) -> str | None:
            if isinstance(value, dict):
                return value.get("url") or value.get("path")
            return value or None  # type: ignore[return-value]

        try:
            text, gallery, archive, tags = result  # type: ignore[misc]
            items = [(file_of(item["image"]), item["caption"]) for item in gallery or []]
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"not a (caption, gallery, zip, tags) answer: {result!r}"[:200]) from error
        if not isinstance(text, str):
            raise ValueError(f"a caption that is not text: {text!r}"[:200])
        return cls(text, tuple(p for p, _ in items), tuple(t for _, t in items), file_of(archive), tags or "")

    def problem(self, vocabulary: Set[str] | None = None, *, with_zip: bool = True) -> str | None:
        """Why this answer is not what the app promises, or None when it is: caption words (of `vocabulary`, when
        given), an overlay file per word titled with that word and a concentration, and the zip (`with_zip`) or
        not yet."""
        words = self.text.split()
        if not words or (vocabulary is not None and not set(words) <= vocabulary):
            return f"caption not in the model's words: {self.text!r}"
        labels = [match["label"] if (match := OVERLAY_TITLE.fullmatch(title or "")) else None for title in self.titles]
        if labels != words or not all(self.pictures):
            return f"{len(self.pictures)} overlays titled {list(self.titles)} for the {len(words)} words of {self.text!r}"[:300]
        if bool(self.archive) != with_zip:
            return "no export zip" if with_zip else "an export zip in the first answer"
        return None


def tags_line(tags: Sequence[Tag] | None, *, can_name: bool) -> str:
    """The line under the caption: the words the encoder's ImageNet head found, each with its probability and its
    most probable ImageNet class ("coffee 94% (espresso)"), or why there are none."""
    if not can_name:
        return "This model's encoder has no ImageNet head: it names only the words of its captions."
    if tags is None:
        return "Objects not named: tick 'Name objects' to let the encoder's ImageNet head add what it sees."
    named = ", ".join(f"{tag} ({tag.classes[0]})" for tag in tags[:3])
    sure = f"{DEFAULT_NAMING.threshold:.0%}"
    return (
        f"The encoder's ImageNet head sees: {named}. A word it is at least {sure} sure of goes into the caption: "
        "always when the captions never had it, otherwise where the caption can hold it."
    )


def caption_gallery(drawn: CaptionOverlays, folder: Path) -> tuple[str, Gallery]:
    """A caption as a page shows it: its text, and its overlays' JPEG previews written into `folder`, each titled
    with its word and how concentrated its attention is ("circle: 62% on top 5%")."""
    previews = drawn.write_previews(folder)
    titles = [overlay_title(word, share) for word, share in zip(drawn.words, drawn.concentration)]
    text = " ".join(drawn.words) or "(the model ended the caption without a word)"
    return text, [(str(path), title) for path, title in zip(previews, titles)]


class Handlers:
    """What the tabs do, with the models loaded once and a folder for the files each request writes.

    `comparers` are the Compare tab's models: by group title (`CompareGroup`), then by the name each row shows.

    `examples` are the Ask tab's example rows: a model's first example question is what a user who asks it
    nothing is told to try (a model without one gets `vqa.questions.example_question`'s suggestion).

    `scopes` are the kinds of question each VQA model (by name) was trained on: one of another kind is refused with a
    hint that says what it answers (`vqa.questions.QuestionScope`); a model without a scope is asked everything.
    """

    def __init__(
        self,
        captioners: Mapping[str, Captioner],
        answerers: Mapping[str, Answerer],
        work_dir: Path,
        *,
        examples: Sequence[Example] = (),
        comparers: Mapping[str, Mapping[str, Captioner]] | None = None,
        scopes: Mapping[str, QuestionScope] | None = None,
    ) -> None:
        self.captioners = dict(captioners)
        self.answerers = dict(answerers)
        self.comparers = {title: dict(models) for title, models in (comparers or {}).items()}
        self.compare_rows = max(map(len, self.comparers.values()), default=0)  # the tab's rows, for the largest group
        self.exports = work_dir / "exports"
        self.scopes = dict(scopes or {})
        self.suggested = {name: example_question(a.model.question_vocabulary) for name, a in self.answerers.items()}
        for _, name, question in reversed(examples):  # reversed: a model's first example is kept
            self.suggested[name] = question

    def caption(
        self, upload: Upload, model_name: str, beam_size: Any, map_choice: Any = OWN_MAP, name_objects: Any = True
    ) -> Iterator[tuple[str, Gallery, str | None, str]]:
        """Caption the photo, in two steps: first (the caption, [(overlay path, word)] in caption order, None, the
        tags line) as soon as the overlays are drawn, then the same with the export zip's path once it is written
        (an API caller's `predict` gets this last answer). The gallery shows JPEG copies of the overlays (a
        tenth of the PNGs' size, quicker to send and to show); the zip holds the export itself.

        `map_choice` picks, for a Transformer, which of its cross-attention maps the overlays show: an index into
        `Captioner.head_choices` (the tab's "Map" choice), or OWN_MAP for the one its search records. `name_objects`:
        name what the encoder's ImageNet head sees (`captioning.naming`), for a model whose encoder has one."""
        captioner = chosen(self.captioners, model_name)
        width = beam_width(beam_size)
        choice = head_choice(captioner, map_choice)
        image, name = uploaded_image(upload)
        warn_if_tiny(image, name, captioner.model.encoder.input_shape)
        folder = fresh_folder(self.exports) / safe_stem(name)
        named = bool(name_objects) and captioner.can_name_objects
        result = captioner.caption(image, beam_size=width, name_objects=named)
        if choice is not None:  # the caption stays; its maps are that layer's and head's
            result = result.showing(choice)
        drawn = result.draw()
        # a "." is never in safe_stem's names, so this folder cannot be the export folder itself
        text, overlays = caption_gallery(drawn, folder.with_name(f"{folder.name}.gallery"))
        tags = tags_line(result.tags, can_name=captioner.can_name_objects)
        yield text, overlays, None, tags
        # one core stays free to serve the gallery meanwhile
        drawn.write(folder, source=name, parallel=False, details=result.details)
        yield text, overlays, str(zip_folder(folder, folder.parent / f"{folder.name}_attention.zip")), tags

    def ask(self, upload: Upload, model_name: str, question: str | None) -> tuple[dict[str, float], Gallery, str]:
        """Answer the question -> ({answer in words: probability} for the top answers, [(hop overlay path,
        "hop k: 40% on top 5%")], the export zip's path: hop overlays, grid.png with the question over it,
        answer.json). A question longer than the model reads is answered from its first words, with a warning in
        the page that says so; one of a kind the model was not trained on is refused with what it answers."""
        answerer = chosen(self.answerers, model_name)
        image, name = uploaded_image(upload)
        warn_if_tiny(image, name, answerer.model.encoder.input_shape)
        question = question if isinstance(question, str) else ""
        folder = fresh_folder(self.exports) / safe_stem(name)
        try:
            if model_name in self.scopes:
                self.scopes[model_name].check(question)
            answer = answerer.ask(image, question, top_k=TOP_ANSWERS, warn=False)  # the page says it (below)
        except QuestionError as error:
            message = empty_question_message(self.suggested[model_name]) if error.empty else str(error)
            raise refusal(message) from None
        record = replace(answer, source=name).save(folder)
        if answer.notice is not None:
            gr.Warning(answer.notice)
        hops = [
            (str(folder / f"hop_{k}.png"), overlay_title(f"hop {k}", share))
            for k, share in enumerate(record["concentration"], start=1)
        ]
        archive = zip_folder(folder, folder.parent / f"{folder.name}_attention.zip")
        return {answer_words(answer): probability for answer, probability in record["answers"]}, hops, str(archive)

    def compare(self, upload: Upload, follow: str | None, group: Any = None) -> list[str | Gallery]:
        """Caption the photo with every model of a Compare group (its title; None for the first) -> [caption,
        [(overlay path, word)]] per row of the tab, flattened: the group's models in order, then ("", []) for the
        rows it leaves empty. With a caption to `follow` (not blank) every model is teacher-forced on it instead,
        so the maps of the same word sit in the same column for every model."""
        if not self.comparers:
            raise refusal("This app was started without models to compare.")
        title = next(iter(self.comparers)) if group is None else group
        models = self.comparers.get(title) if isinstance(title, str) else None  # API callers can send anything
        if models is None:
            raise refusal(f"Unknown group {group!r}: choose one of {', '.join(map(repr, self.comparers))}.")
        image, name = uploaded_image(upload)
        follow = follow.strip() if isinstance(follow, str) else ""
        folder = fresh_folder(self.exports) / safe_stem(name)
        outputs: list[str | Gallery] = []
        for number, captioner in enumerate(models.values(), start=1):
            try:
                if follow:
                    result = captioner.follow(image, follow)
                else:  # the same search for every model: no named objects, one beam width
                    result = captioner.caption(image, beam_size=DEFAULT_BEAM_SIZE, name_objects=False)
            except UnknownWordsError as error:
                raise refusal(unknown_words_message(error)) from None
            except ValueError as error:  # no word at all, or more than a caption to follow may have
                raise refusal(f"{str(error)[0].upper()}{str(error)[1:]}.") from None
            outputs += caption_gallery(result.draw(), folder.with_name(f"{folder.name}.model_{number}"))
        return outputs + ["", []] * (self.compare_rows - len(models))


MAX_LISTED_WORDS = 60  # a vocabulary this small is listed whole when a caption to follow leaves it


def unknown_words_message(error: UnknownWordsError) -> str:
    """What a person is told when the caption to follow has words the models lack: those words, then the
    vocabulary itself when it is short enough to read (ShapesWorld's), its size otherwise (Flickr8k's)."""
    unknown = f"The caption to follow has words the models do not know: {', '.join(map(repr, error.words))}."
    if len(error.vocabulary) <= MAX_LISTED_WORDS:
        return f"{unknown} Write it with theirs: {error.known}."
    size = len(error.vocabulary)
    return f"{unknown} They know the {size} words frequent in their training captions: write it with everyday words."


# -- the app ---------------------------------------------------------------------------------------------------


def build_app(
    *,
    caption_checkpoints: Mapping[str, Path],
    vqa_checkpoints: Mapping[str, Path],
    compare_groups: Sequence[CompareGroup] = COMPARE_GROUPS,
    work_dir: Path = WORK_DIR,
    max_queue: int = DEFAULT_MAX_QUEUE,
) -> gr.Blocks:
    """The Blocks app with its models loaded; serve it with `launch_app` (or `.launch`).

    Args:
        caption_checkpoints: captioning checkpoints by the name the "Caption" tab's model choice shows; the first
            is chosen at first.
        vqa_checkpoints: VQA checkpoints by the name the "Ask" tab's model choice shows; the first is chosen at
            first.
        compare_groups: the "Compare" tab's choices of captioning models to set side by side (by default the six
            bundled ShapesWorld models, one per attention score function, then the two Flickr8k decoders); empty
            for no Compare tab. A checkpoint that another tab or group also names is loaded once.
        work_dir: where the example pictures and each request's files are written (by default WORK_DIR,
            deleted at exit).
        max_queue: requests that may wait, all tabs together; a request beyond them is refused at once with
            a busy message (the page: "This application is currently busy. Please try again."; gradio_client:
            QueueError "Queue is full! Please try again."), so a crowd costs a bounded amount of memory.
    """
    if not caption_checkpoints or not vqa_checkpoints:
        raise ValueError("build_app needs at least one captioning checkpoint and one VQA checkpoint")
    if max_queue < 1:
        raise ValueError(f"max_queue must be at least 1, got {max_queue}")
    captioners, answerers = load_models(caption_checkpoints, vqa_checkpoints)
    loaded = {Path(path).resolve(): captioners[name] for name, path in caption_checkpoints.items()}
    comparers = {
        group.title: {name: loaded_once(loaded, path) for name, path in group.checkpoints.items()}
        for group in compare_groups
    }
    questions = question_examples(vqa_checkpoints)
    scopes = question_scopes(vqa_checkpoints)
    handlers = Handlers(captioners, answerers, work_dir, examples=questions, comparers=comparers, scopes=scopes)
    examples = write_examples(work_dir / "examples")
    # delete_cache: Gradio's copies of uploads and results go after 15 minutes (checked every 5), as the exports do
    # (EXPORT_MAX_AGE_S); launch_app also bounds their total size (DiskBound)
    with gr.Blocks(title="Visual attention", analytics_enabled=False, delete_cache=(300, EXPORT_MAX_AGE_S)) as app:
        gr.Markdown(app_header(caption_checkpoints, vqa_checkpoints, compare=bool(comparers)))
        with gr.Tab("Caption"):
            _caption_tab(handlers, examples)
        with gr.Tab("Ask"):
            _ask_tab(handlers, examples, questions)
        if comparers:
            with gr.Tab("Compare"):
                _compare_tab(handlers, examples, {group.title: group.about for group in compare_groups})
    return app.queue(max_size=max_queue)


HEADING = (
    "# Visual attention\nShow, Attend and Tell captions and Stacked Attention Network answers, with where the model "
    "looked."
)
BUNDLED_ABOUT = (
    "The bundled models were trained on **Flickr8k** photos (captions), questions made from Flickr8k's captions, "
    "**DAQUAR** indoor photos (questions), and **ShapesWorld** scenes of coloured shapes, which speak only of shapes and colours "
    "whatever the picture; the captioners also name what their encoder's ImageNet classifier sees."
)


def app_header(
    caption_checkpoints: Mapping[str, Path], vqa_checkpoints: Mapping[str, Path], *, compare: bool = False
) -> str:
    """The page's heading (Markdown) and what the app serves: what the bundled models were trained on when the Caption
    and Ask tabs serve only bundled models; otherwise each tab's models by name, a user's own with its file (and
    that the Compare tab's, when there is one, are bundled ones), so the page never describes models it does not
    serve."""
    bundled = {path.resolve() for path in (*CAPTION_CHECKPOINTS.values(), *VQA_CHECKPOINTS.values())}

    def own(path: Path) -> bool:
        return Path(path).resolve() not in bundled

    if not any(map(own, (*caption_checkpoints.values(), *vqa_checkpoints.values()))):
        return f"{HEADING} {BUNDLED_ABOUT}"

    def named(checkpoints: Mapping[str, Path]) -> str:
        return ", ".join(f"**{name}** ({f'`{p}`' if own(p) else 'bundled'})" for name, p in checkpoints.items())

    served = f"Captions by {named(caption_checkpoints)}; answers by {named(vqa_checkpoints)}."
    return f"{HEADING} {served}" + (" The Compare tab sets bundled models side by side." if compare else "")


def scale_legend(scale: FixedScale = FixedScale()) -> str:
    """What the overlays' colours and titles mean, for the page (Markdown), in the words of the colour bar of
    the export's grid.png."""
    example = short_share(0.62, TOP_AREA)
    return (
        f"**Colours**: 1 = uniform attention (the model looking everywhere equally); brighter = more attention "
        f"than uniform, up to the brightest yellow at {scale.top:g}x uniform or more. The scale is the same for "
        f"every word, so a flat map looks flat. **\"dog: {example}\"**: 62% of the attention for \"dog\" falls on "
        f"the most attended {TOP_AREA:.0%} of the photo (uniform attention puts {TOP_AREA:.0%} there; higher = "
        "more focused)."
    )


# The overlay galleries (`overlay_gallery`): each tile as tall as its picture, which keeps the photo's aspect, and the
# title under the picture, whole and wrapped, instead of over its corner and cut with an ellipsis.
GALLERY_CSS = """
.overlays .grid-wrap { padding-top: 28px; }
.overlays .thumbnail-item { aspect-ratio: auto; height: auto; display: flex; flex-direction: column; }
.overlays .thumbnail-item img { width: 100%; height: auto; }
.overlays .caption-label { position: static; max-width: none; white-space: normal; overflow: visible;
  text-overflow: clip; text-align: center; margin: 0; border: none; background: none; }
.overlays .grid-wrap.fixed-height { max-height: none; overflow-y: visible; }
"""
"""The gallery grows with its overlays instead of scrolling inside a box of 55% of the window (Gradio's own for a
gallery of height "auto"), where a portrait photo's last row of words was cut off with no sign of a scroll."""

# The rest of the page:
# * a refused request is said once, in its toast: the red "Error" badge (and its close button) Gradio also puts on each
#   output of the Ask and Compare tabs (four at once in Compare) read as a crash; those tabs empty their outputs
#   before each request instead;
# * an uploaded photo's preview is at least PREVIEW_MIN px a side, so a 1x1 picture does not collapse the box (a
#   picture that small is shown enlarged).
PREVIEW_MIN = 96
PAGE_CSS = f"""
[id^="ask-"] > .wrap:has(> .error), [id^="compare-"] > .wrap:has(> .error) {{ display: none; }}
.photo .image-frame img {{ min-width: {PREVIEW_MIN}px; min-height: {PREVIEW_MIN}px; object-fit: contain; }}
"""


def overlay_gallery(label: str, *, columns: int, elem_id: str) -> gr.Gallery:
    """A gallery of overlays that shows each one whole: the photo's aspect kept (no square crop), the title under
    the picture in full rather than over its corner, cut short (`GALLERY_CSS`)."""
    return gr.Gallery(
        label=label, columns=columns, object_fit="contain", height="auto", elem_id=elem_id, elem_classes=["overlays"]
    )


def photo_input(*, elem_id: str) -> gr.Image:
    """An upload box whose file reaches the handler untouched (image_mode=None: no conversion by Gradio)."""
    return gr.Image(
        label="Photo", type="filepath", image_mode=None, sources=["upload", "clipboard"], elem_id=elem_id,
        elem_classes=["photo"],
    )  # fmt: skip


def _caption_tab(handlers: Handlers, examples: Mapping[str, Path]) -> None:
    with gr.Row():
        with gr.Column():
            image = photo_input(elem_id="caption-image")
            first = next(iter(handlers.captioners))
            model = gr.Radio(list(handlers.captioners), value=first, label="Model")
            beam = gr.Slider(1, MAX_BEAM_SIZE, value=DEFAULT_BEAM_SIZE, step=1, label="Beam size")
            maps = map_dropdown(handlers.captioners[first])
            name_objects = gr.Checkbox(
                value=True, label="Name objects", elem_id="caption-name-objects",
                info="Let the encoder's ImageNet head add what it sees, in words the captions never had too",
            )  # fmt: skip
            button = gr.Button("Caption", variant="primary")
        with gr.Column():
            caption = gr.Textbox(label="Caption", interactive=False, elem_id="caption-text")
            tags = gr.Markdown("", elem_id="caption-tags")
            overlays = overlay_gallery("Where the model looked, word by word", columns=4, elem_id="caption-gallery")
            gr.Markdown(scale_legend(), elem_id="caption-legend")
            archive = gr.File(label="Export (overlays, grid, GIF, caption.json)", elem_id="caption-export")
    names = list(PHOTO_EXAMPLES) + [f"scene_{i}" for i in SCENE_EXAMPLES]  # photos for the first (Flickr8k) model
    gr.Examples([[str(examples[name])] for name in names], inputs=[image])
    # preprocess=False: the handler gets the uploaded file's path and opens it with load_image itself
    button.click(
        handlers.caption, [image, model, beam, maps, name_objects], [caption, overlays, archive, tags],
        api_name="caption", preprocess=False,
    )  # fmt: skip
    model.change(lambda name: map_dropdown(chosen(handlers.captioners, name)), model, maps, api_name=False)


def map_dropdown(captioner: Captioner) -> gr.Dropdown:
    """The Caption tab's "Map" choice for a model: which layer's and head's cross-attention a Transformer's overlays
    show; hidden for a model with one map per word."""
    choices = map_choices(captioner)
    return gr.Dropdown(
        choices or [("its attention", OWN_MAP)], value=OWN_MAP, label="Map (a Transformer's layer and head)",
        visible=bool(choices), elem_id="caption-map",
    )  # fmt: skip


def _ask_tab(handlers: Handlers, examples: Mapping[str, Path], questions: Sequence[Example]) -> None:
    with gr.Row():
        with gr.Column():
            image = photo_input(elem_id="ask-image")
            model = gr.Radio(
                list(handlers.answerers), value=next(iter(handlers.answerers)), label="Model", elem_id="ask-model"
            )
            question = gr.Textbox(
                label="Question", placeholder="what colour is the circle?", max_lines=1, elem_id="ask-question"
            )
            button = gr.Button("Ask", variant="primary")
        with gr.Column():
            answers = gr.Label(label="Answers", num_top_classes=TOP_ANSWERS, elem_id="ask-answers")
            hops = overlay_gallery("Where each attention hop looked", columns=2, elem_id="ask-gallery")
            gr.Markdown(scale_legend(), elem_id="ask-legend")
            archive = gr.File(label="Export (hop overlays, grid with the question, answer.json)", elem_id="ask-export")
    if questions:  # picking one chooses its model too: a ShapesWorld question is asked of the ShapesWorld model
        rows = [[str(examples[picture]), name, text] for picture, name, text in questions]
        gr.Examples(rows, inputs=[image, model, question])
    else:  # none of the bundled models is loaded: the pictures alone, for questions in the loaded models' words
        gr.Examples([[str(path)] for path in examples.values()], inputs=[image])
    answer_from_empty(
        [button.click, question.submit], handlers.ask, [image, model, question], [answers, hops, archive],
        [None, None, None], api_name="ask",
    )  # fmt: skip


def answer_from_empty(
    triggers: Sequence[Any],
    handler: Any,
    inputs: Sequence[gr.components.Component],
    outputs: Sequence[gr.components.Component],
    empty: Sequence[Any],
    *,
    api_name: str,
) -> None:
    """Run `handler` (its raw inputs: preprocess=False) on `triggers` after setting `outputs` to `empty`, at once and
    unqueued: a request that is refused then never stands beside the answer to the one before it. API callers of
    `api_name` reach the handler alone."""
    cleared = gr.on(triggers, lambda: list(empty), None, outputs, queue=False, show_progress="hidden", api_name=False)
    cleared.then(handler, inputs, outputs, api_name=api_name, preprocess=False)


FOLLOW_NOTE = "Give a caption to follow and every model is made to say it, so each column of maps is the same word."


def _compare_tab(handlers: Handlers, examples: Mapping[str, Path], abouts: Mapping[str, str]) -> None:
    """The models of one group (`CompareGroup`, picked above the photo) side by side, a row each: the tab has as
    many rows as the largest group, and picking a group names its rows and hides those it leaves empty."""
    titles = list(handlers.comparers)
    group = gr.Radio(titles, value=titles[0], label="Compare", elem_id="compare-group")
    about = gr.Markdown(f"{abouts.get(titles[0], '')} {FOLLOW_NOTE}", elem_id="compare-about")
    with gr.Row():
        image = photo_input(elem_id="compare-image")
        with gr.Column():
            follow = gr.Textbox(
                label="Caption to follow (optional: blank lets each model say its own)",
                placeholder="a small red square above a large blue circle",
                max_lines=1,
                elem_id="compare-follow",
            )
            button = gr.Button("Compare", variant="primary")
            gr.Markdown(scale_legend(), elem_id="compare-legend")

    def names_of(title: str) -> list[str]:
        """The name each row shows for a group: its models', then "" for the rows it leaves empty (hidden)."""
        names = list(chosen(handlers.comparers, title))
        return names + [""] * (handlers.compare_rows - len(names))

    def gallery_label(name: str) -> str:
        return f"{name}: where it looked, word by word"

    columns: list[gr.Column] = []
    outputs: list[gr.components.Component] = []  # (caption, gallery) per row, flattened, as `compare` answers
    first = names_of(titles[0])
    for row in range(0, handlers.compare_rows, 2):
        with gr.Row():
            for number, name in enumerate(first[row : row + 2], start=row + 1):
                with gr.Column(visible=bool(name)) as column:
                    outputs.append(gr.Textbox(label=name, interactive=False, elem_id=f"compare-caption-{number}"))
                    outputs.append(overlay_gallery(gallery_label(name), columns=4, elem_id=f"compare-gallery-{number}"))
                columns.append(column)

    def rows_of(title: str) -> list[Any]:
        """The page for another group: its description, its rows shown and named after its models and emptied."""
        names = names_of(title)
        shown = [gr.Column(visible=bool(name)) for name in names]
        emptied = [
            component
            for name in names
            for component in (gr.Textbox(label=name, value=""), gr.Gallery(label=gallery_label(name), value=None))
        ]
        return [gr.Markdown(f"{abouts.get(title, '')} {FOLLOW_NOTE}"), *shown, *emptied]

    scenes = [f"scene_{i}" for i in SCENE_EXAMPLES]
    gr.Examples([[str(examples[name])] for name in scenes + list(PHOTO_EXAMPLES)], inputs=[image])
    answer_from_empty(
        [button.click, follow.submit], handlers.compare, [image, follow, group], outputs,
        ["", None] * handlers.compare_rows, api_name="compare",
    )  # fmt: skip
    group.change(rows_of, group, [about, *columns, *outputs], api_name=False)


class DiskBound:
    """Keeps the files under `folder` (Gradio's cache of uploads and results) within `max_bytes` all together, the
    oldest deleted first, checked every `every_s` seconds while the app serves. Uploads reach Gradio's cache before
    any queue (and even without a request), so the bound is kept on the folder, not per request: at most one
    sweep's worth of uploads can pass it, and a sweep brings the total back under it."""

    def __init__(self, folder: Path, max_bytes: int, every_s: float = CACHE_SWEEP_S) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.folder, self.max_bytes, self.every_s = folder, max_bytes, every_s

    def sweep(self) -> int:
        """Delete the oldest files until the folder is within the bound; returns the bytes freed."""
        files = []
        for path in self.folder.rglob("*"):
            try:
                if path.is_file():
                    stat = path.stat()
                    files.append((stat.st_mtime, stat.st_size, path))
            except OSError:  # deleted meanwhile (Gradio's own clean-up, or a finished request's)
                continue
        total, freed = sum(size for _, size, _ in files), 0
        for _, size, path in sorted(files, key=lambda item: item[0]):
            if total - freed <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            freed += size
        if freed:
            log.info("disk bound: deleted %d MB of the oldest cached files (bound %d MB)", freed >> 20, self.max_bytes >> 20)
        return freed

    def keep(self, app: gr.Blocks) -> threading.Thread:
        """Sweep every `every_s` seconds in a daemon thread while `app` is running."""

        def run() -> None:
            while app.is_running:
                time.sleep(self.every_s)
                self.sweep()

        thread = threading.Thread(target=run, name="disk-bound", daemon=True)
        thread.start()
        return thread


def page_theme() -> gr.themes.Base:
    """Gradio's default theme, its text font's bold face (700) in place of its semibold one (600). The SemiBold file
    Gradio ships holds 90 glyphs, so every semibold or bold word (the heading, buttons, **bold** in the Markdown) was
    drawn letter by letter in another, larger font wherever a letter was missing; the Bold file is whole, and CSS
    takes it for 600 too (the nearest heavier weight). Its fonts are served by the app, as the default's are."""
    font = gr.themes.LocalFont("Source Sans Pro", weights=(400, 700))
    return gr.themes.Default(font=[font, "ui-sans-serif", "system-ui", "sans-serif"])


def launch_app(
    app: gr.Blocks,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    max_cache_mb: int = DEFAULT_MAX_CACHE_MB,
    **options: Any,
) -> None:
    """Serve the app locally and offline: never shared, no server-side rendering (it would need Node), the
    default theme (its fonts are served by the app, none come from a font CDN), uploads up to MAX_UPLOAD, and
    Gradio's cache of uploads and results kept within `max_cache_mb` MB (`DiskBound`).
    Gradio's own start-up lines are replaced by one that says where the app is (its hint to set `share=True` would
    suggest the opposite of this local, offline app); `quiet=True` prints nothing."""
    quiet = options.pop("quiet", False)
    hold = not options.pop("prevent_thread_lock", False)
    app.launch(
        server_name=host,
        server_port=port,
        share=False,
        ssr_mode=False,
        theme=page_theme(),
        css=GALLERY_CSS + PAGE_CSS,
        max_file_size=MAX_UPLOAD,
        quiet=True,
        prevent_thread_lock=True,
        **options,
    )
    DiskBound(Path(os.environ["GRADIO_TEMP_DIR"]), max_cache_mb << 20).keep(app)
    if not quiet:
        where = "this computer only" if host in ("127.0.0.1", "localhost") else "reachable from your network"
        print(f"* Running on local URL:  {app.local_url} ({where}; Ctrl+C stops it)", flush=True)
    if hold:
        app.block_thread()


def parse_arguments(argv: Sequence[str] | None) -> Namespace:
    parser = ArgumentParser(
        prog="python demo.py",
        description="Caption photos and answer questions about them, showing where the model looked.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (the default: this computer only)")
    parser.add_argument("--port", type=PositiveInt, default=DEFAULT_PORT, help="port")
    for flag, bundled, what in (
        ("--caption-model", CAPTION_MODELS, "captioning"),
        ("--vqa-model", MODELS, "VQA"),
    ):
        parser.add_argument(
            flag,
            action="append",
            metavar="MODEL",
            help=f"a {what} model: a bundled model's name ({', '.join(bundled)}), a checkpoint's path, or NAME=PATH to "
            "show the checkpoint under NAME; repeat for several. When given, these replace the bundled "
            f"{what} models the app shows by default",
        )
    parser.add_argument(
        "--max-queue",
        type=PositiveInt,
        default=DEFAULT_MAX_QUEUE,
        help="requests that may wait, all tabs together; more are refused with a busy message",
    )
    parser.add_argument(
        "--max-cache-mb",
        type=PositiveInt,
        default=DEFAULT_MAX_CACHE_MB,
        help="disk space the uploads and results may take, all together; beyond it the oldest are deleted",
    )
    args = parser.parse_args(argv)
    for option, shown, bundled in (
        ("caption_model", CAPTION_CHECKPOINTS, CAPTION_MODELS),
        ("vqa_model", VQA_CHECKPOINTS, MODELS),
    ):
        try:
            args[option] = dict(named_checkpoint(text, bundled) for text in args[option]) if args[option] else dict(shown)
        except ValueError as error:
            parser.error(f"--{option.replace('_', '-')}: {error}")
    return args


def named_checkpoint(text: str, bundled: Mapping[str, PretrainedModel]) -> tuple[str, Path]:
    """A --caption-model or --vqa-model value -> (the name the app shows, the checkpoint): a bundled model's name
    ("flickr8k-soft": its title and file), a checkpoint's path (shown as given) or NAME=PATH, as every command of the
    project names a model."""
    if text in bundled:
        return bundled[text].title, bundled[text].file
    if Path(text).is_file():
        return text, Path(text)
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path:
        raise ValueError(
            f"{text!r} is neither a bundled model ({', '.join(bundled)}) nor a checkpoint file; or give NAME=PATH "
            "(e.g. mine=runs/x/best.ckpt)"
        )
    return name.strip(), Path(path)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    stop_on_sigterm()
    try:
        app = build_app(
            caption_checkpoints=args.caption_model,
            vqa_checkpoints=args.vqa_model,
            max_queue=args.max_queue,
        )
    except (FileNotFoundError, ValueError) as error:  # a checkpoint that is missing or not of the right kind
        raise SystemExit(f"error: {error}") from None
    launch_app(app, host=args.host, port=args.port, max_cache_mb=args.max_cache_mb)


if __name__ == "__main__":
    main()
