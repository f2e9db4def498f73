"""The demo app under load: many people at once, each captioning a picture and asking a question about it.

    python benchmarks/app_load.py [--clients 50] [--beam-size 3] [--model NAME]
    taskset -c 0,1 python benchmarks/app_load.py        # 2 cores

The app (`demo.build_app` with the bundled checkpoints and its default bounded queue, `demo.DEFAULT_MAX_QUEUE`
requests waiting) is served on a free 127.0.0.1 port by a child process, as in `app_latency.py`. `--clients`
threads, one `gradio_client.Client` each (connected beforehand), start at the same moment; each sends one
Caption request, waits for its last answer (the one with the export zip), then asks one question (the Ask
tab) about the same picture, a ShapesWorld test scene and the question the app offers as its example for it.

An answer counts only when it is what the app promises: a caption as `demo.CaptionAnswer` describes it (the
model's own words, one overlay per word titled with that word and its concentration, the export zip); for a
question, the top answers with probabilities in [0, 1], best first, one overlay per attention hop and the export
zip. A request the full queue turns away at once ("Queue is full! Please try again.") is refused; one that fails
or answers in another form is lost, and the reasons of the first few are kept.

Prints one JSON line: requests sent, answered, refused and lost, the wall time until the last client finished,
and p50 / p95 / max latency (seconds) of the answered Caption requests, the answered questions, and each client's
two requests together; the CPU seconds the server and the clients' process spent meanwhile (on a 2-core machine
the clients' own share bounds what can be measured). `all_admitted_answered`: nothing lost, every request the
queue took was answered.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app_latency import (  # sets the offline environment
    CAPTION_CHECKPOINTS,
    DEFAULT_MODEL,
    REQUEST_TIMEOUT_S,
    cpu_info,
    file_url,
    process_cpu_s,
    start_server,
    stop_server,
    summary,
)

from vqa.bundled import SHAPES_SAN, VQA_CHECKPOINTS

SHAPES_VQA = next(name for name, path in VQA_CHECKPOINTS.items() if path == SHAPES_SAN)  # asked about scenes

MAX_ERRORS_SHOWN = 5


def write_scene(folder: Path) -> tuple[Path, str]:
    """The Ask tab's first ShapesWorld scene example as PNG, and its example question."""
    import demo

    name, question = next((name, q) for name, _, q in demo.QUESTION_EXAMPLES if name.startswith("scene_"))
    return demo.write_examples(folder)[name], question


@dataclass(frozen=True)
class Expected:
    """What a right answer looks like, from the bundled checkpoints."""

    vocabulary: frozenset[str]  # the caption model's words, without the special tokens
    hops: int  # attention hops of the VQA model: overlays per answer
    top: int  # answers per question

    @classmethod
    def of_bundled_models(cls, model: str) -> "Expected":
        import demo
        from captioning.bundled import CAPTION_CHECKPOINTS
        from core.training.checkpoints import read_checkpoint

        words = read_checkpoint(CAPTION_CHECKPOINTS[model])["hyper_parameters"]["vocabulary"]
        vqa = read_checkpoint(SHAPES_SAN)["hyper_parameters"]
        specials = {"<pad>", "<start>", "<end>", "<unk>"}
        hops = vqa["san"]["init_args"]["hops"]
        return cls(frozenset(words) - specials, hops, min(demo.TOP_ANSWERS, len(vqa["answers"])))

    def caption_problem(self, result: object) -> str | None:
        """Why a Caption answer is not what the app promises (`demo.CaptionAnswer`), or None when it is."""
        from demo import CaptionAnswer

        try:
            return CaptionAnswer.from_api(result).problem(self.vocabulary)
        except ValueError as error:
            return str(error)

    def answer_problem(self, result: object) -> str | None:
        """Why an Ask answer is wrong in form, or None when it is right."""
        try:
            answers, hops, archive = result  # type: ignore[misc]
            probabilities = [c["confidence"] for c in answers["confidences"]]
        except (TypeError, ValueError, KeyError):
            return f"not an (answers, hop overlays, zip) answer: {result!r}"[:200]
        if len(probabilities) != self.top or not all(0 <= p <= 1 for p in probabilities):
            return f"answers without probabilities: {answers!r}"[:200]
        if probabilities != sorted(probabilities, reverse=True):
            return f"answers not best first: {probabilities}"
        if len(hops or []) != self.hops or not all(file_url(h.get("image")) for h in hops):
            return f"{len(hops or [])} hop overlays, expected {self.hops}"
        return None if file_url(archive) else "no export zip"


@dataclass
class Outcome:
    """One client's two requests: latencies of those answered right, reasons for those lost, and how many the
    full queue refused at once (the app's promise under load: every request it admits is answered)."""

    caption_s: float = math.nan
    ask_s: float = math.nan
    lost: list[str] = field(default_factory=list)
    refused: int = 0


def problem_of(error: Exception) -> str | None:
    """A failed request's reason, or None when the app refused it because its queue was full."""
    from gradio_client.utils import QueueError

    return None if isinstance(error, QueueError) else f"{type(error).__name__}: {error}"[:200]


class Person:
    """One API client: a caption of the picture, then a question about it."""

    def __init__(self, url: str, picture: Path, question: str, model: str, beam_size: int, expected: Expected) -> None:
        from gradio_client import Client

        self.client = Client(url, verbose=False, download_files=False)
        self.picture, self.question, self.model, self.beam_size = picture, question, model, beam_size
        self.expected = expected

    def __call__(self) -> Outcome:
        from gradio_client import handle_file

        outcome = Outcome()
        picture = handle_file(str(self.picture))
        outcome.caption_s = self.request(
            outcome, "caption", lambda: self.client.submit(picture, self.model, self.beam_size, api_name="/caption"),
            self.expected.caption_problem,
        )
        outcome.ask_s = self.request(
            outcome, "ask", lambda: self.client.submit(picture, SHAPES_VQA, self.question, api_name="/ask"),
            self.expected.answer_problem,
        )
        return outcome

    @staticmethod
    def request(outcome: Outcome, kind: str, send: Callable[[], Any], problem: Callable[[object], str | None]) -> float:
        """One request: its latency when answered right; NaN when the full queue refused it (counted in
        `outcome.refused`) or when it was lost (its reason kept in `outcome.lost`)."""
        start = time.perf_counter()
        try:
            reason = problem(send().result(timeout=REQUEST_TIMEOUT_S))
        except Exception as error:
            reason = problem_of(error)
            if reason is None:
                outcome.refused += 1
                return math.nan
        if reason is not None:
            outcome.lost.append(f"{kind}: {reason}")
            return math.nan
        return time.perf_counter() - start

    def close(self) -> None:
        self.client.close()


def percentiles(latencies: Sequence[float]) -> dict | None:
    """p50, p95 and max of the answered requests' latencies (seconds), or None when none was answered."""
    answered = [value for value in latencies if not math.isnan(value)]
    if not answered:
        return None
    figures = summary(answered)
    return {"p50": figures["median"], "p95": figures["p95"], "max": figures["max"], "n": figures["n"]}


def run_load(url: str, picture: Path, question: str, args: argparse.Namespace, server_pid: int) -> dict:
    """`args.clients` people at once, each a caption then a question, against the server process `server_pid`;
    the figures of the JSON line."""
    expected = Expected.of_bundled_models(args.model)
    people = [Person(url, picture, question, args.model, args.beam_size, expected) for _ in range(args.clients)]
    unfinished = ["caption: no answer in time", "ask: no answer in time"]
    outcomes = [Outcome(lost=list(unfinished)) for _ in range(args.clients)]
    gate = threading.Barrier(args.clients + 1)

    def one(index: int) -> None:
        gate.wait()
        outcomes[index] = people[index]()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(args.clients)]
    for thread in threads:
        thread.start()
    gate.wait()
    start, server_start, clients_start = time.perf_counter(), process_cpu_s(server_pid), time.process_time()
    for thread in threads:
        thread.join(2 * REQUEST_TIMEOUT_S)
    wall = time.perf_counter() - start
    server_end, clients_cpu = process_cpu_s(server_pid), time.process_time() - clients_start
    server_cpu = None if server_start is None or server_end is None else server_end - server_start
    for person in people:
        person.close()

    requests = 2 * args.clients
    lost = [reason for outcome in outcomes for reason in outcome.lost]
    refused = sum(outcome.refused for outcome in outcomes)
    return {
        "clients": args.clients,
        "requests": requests,
        "answered": requests - len(lost) - refused,
        "refused": refused,
        "lost": len(lost),
        "wall_s": round(wall, 3),
        "caption": percentiles([o.caption_s for o in outcomes]),
        "ask": percentiles([o.ask_s for o in outcomes]),
        "client_total": percentiles([o.caption_s + o.ask_s for o in outcomes]),
        "errors": sorted(set(lost))[:MAX_ERRORS_SHOWN],
        "cpu_s": {"server": None if server_cpu is None else round(server_cpu, 2), "clients": round(clients_cpu, 2)},
    }


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/app_load.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="people at once, a caption and a question each (default 50)")
    parser.add_argument("--beam-size", type=int, default=3, help="beam width of the captions (default 3)")
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, choices=list(CAPTION_CHECKPOINTS), help=f"captioning model (default {DEFAULT_MODEL})"
    )
    args = parser.parse_args(argv)
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    import demo

    with tempfile.TemporaryDirectory(prefix="app-load-") as folder:
        picture, question = write_scene(Path(folder))
        child, url, server_cpus = start_server()
        try:
            figures = run_load(url, picture, question, args, child.pid)
        finally:
            stop_server(child)
    figures = {
        "picture": picture.name,
        "question": question,
        "model": args.model,
        "beam_size": args.beam_size,
        "max_queue": demo.DEFAULT_MAX_QUEUE,
        **figures,
        "server": server_cpus,
        "client": cpu_info(),
        "all_answered": figures["lost"] == 0 and figures["refused"] == 0,
        "all_admitted_answered": figures["lost"] == 0,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
