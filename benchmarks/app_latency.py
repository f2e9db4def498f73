"""Latency of the demo app's Caption tab, end to end through HTTP and for the handler alone.

    python benchmarks/app_latency.py [--requests 20] [--warmup 2] [--clients 20] [--beam-size 3] [--model NAME]
    taskset -c 0,1 python benchmarks/app_latency.py        # the goal's setting: 2 cores

The goal: caption + overlays for one 640x480 photo with beam 3 on 2 cores, median latency at most 0.5 s,
and 20 concurrent clients all answered.

The app (`demo.build_app` with the bundled checkpoints) is served on a free 127.0.0.1 port by a child process
(this script run with `--serve PORT`), as `python demo.py` would serve it, so the clients' own work does not
share the server's interpreter. The photo is scikit-image's coffee resized to 640x480 and saved as JPEG.
The Caption handler is a generator: it answers first with the caption and the gallery (JPEG copies of the
word overlays), then again with the export zip. Measured, each after `--warmup` untimed requests (2):

* `sequential`: `--requests` Caption requests in a row through `gradio_client` (upload, queue, handler,
  output files copied into Gradio's cache): `first`, until the caption and gallery are answered and every
  gallery picture is fetched over one kept-alive connection, as a browser loads them (the goal's figure);
  `complete`, until the answer with the zip arrives; `answered`, how many were complete and correct (the
  zip is fetched and opened too, outside the timings: a person downloads it only by clicking it);
* `concurrent`: `--clients` threads, one `gradio_client.Client` each, each sending one Caption request at
  the same moment: how many were answered, the wall time until the last one, and p50 / p95 / max of the
  `first` and `complete` latencies (Gradio runs one caption at a time, so they grow with the queue);
* `handler`: the function the Caption button calls (`demo.Handlers.caption`), in this process without HTTP:
  until its first answer and until its last, the server's own work;
* `gradio_overhead_median`: `sequential.first.median - handler.first.median`: what HTTP, Gradio and the
  client add.

Prints one JSON line with every figure (seconds), the torch thread count and the CPU count of both processes.
"""

from __future__ import annotations

import os

# Before gradio is imported (here and in the server child, which inherits them): no telemetry, no version
# check, and gradio_client never looks for a Hugging Face Space.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import io
import json
import math
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # demo.py and the packages, when run as `python benchmarks/app_latency.py`

from captioning.bundled import CAPTION_CHECKPOINTS  # noqa: E402  (a registry of paths: imports nothing heavy)

DEFAULT_MODEL = next(iter(CAPTION_CHECKPOINTS))  # the app's first choice: soft attention trained on Flickr8k

WARMUP = 2  # untimed requests (and handler calls) first, by default
GOAL_S = 0.5  # the goal's median latency of a caption and its overlays
PHOTO_SIZE = (640, 480)
READY = "APP_LATENCY_READY "  # the server child's first stdout line starts with this, then a JSON object
START_TIMEOUT_S = 300
REQUEST_TIMEOUT_S = 600


def cpu_info() -> dict:
    """torch's intra-op thread count and the CPUs this process may run on (taskset narrows them)."""
    import torch

    return {
        "torch_threads": torch.get_num_threads(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpus_machine": os.cpu_count(),
    }


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) a running process has used so far, from Linux's /proc; None where
    there is no /proc (the figures that need it are then null)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime and stime, fields 14 and 15


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(port: int) -> None:
    """The child: build the app with the bundled checkpoints, serve it on 127.0.0.1:port until killed. `stop_server`'s
    SIGTERM stops it as Ctrl-C does (`demo.stop_on_sigterm`), so its work folder and the app's are deleted on the way
    out instead of being left in the temp folder."""
    import demo
    from captioning.bundled import CAPTION_CHECKPOINTS
    from vqa.bundled import VQA_CHECKPOINTS

    demo.stop_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="app-latency-server-") as work:
        app = demo.build_app(caption_checkpoints=CAPTION_CHECKPOINTS, vqa_checkpoints=VQA_CHECKPOINTS, work_dir=Path(work))
        demo.launch_app(app, port=port, prevent_thread_lock=True, quiet=True)
        print(READY + json.dumps(cpu_info()), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            app.close()


def start_server() -> tuple[subprocess.Popen, str, dict]:
    """Start the server child; returns (the process, its URL, its cpu_info) once it answers."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    found: dict = {}

    def read_ready() -> None:
        for line in child.stdout:  # type: ignore[union-attr]
            if line.startswith(READY):
                found.update(json.loads(line[len(READY) :]))
                break

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not found:
        child.kill()
        raise SystemExit(f"error: the app did not start within {START_TIMEOUT_S} s (exit status {child.poll()})")
    return child, f"http://127.0.0.1:{port}/", found


def stop_server(child: subprocess.Popen) -> None:
    child.terminate()
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def write_photo(folder: Path) -> Path:
    """scikit-image's coffee (600x400) resized to 640x480, as JPEG."""
    import skimage.data
    from PIL import Image

    path = folder / "coffee_640x480.jpg"
    Image.fromarray(skimage.data.coffee()).resize(PHOTO_SIZE, Image.Resampling.BILINEAR).save(path, quality=90)
    return path


def summary(latencies: Sequence[float]) -> dict:
    """median, p90, p95, min and max of some latencies (seconds), rounded to the millisecond."""
    ordered = sorted(latencies)

    def rank(q: float) -> float:  # nearest-rank percentile: the smallest value with at least q of them at or below it
        return ordered[max(0, math.ceil(q * len(ordered) - 1e-9) - 1)]

    figures = {
        "median": statistics.median(ordered),
        "p90": rank(0.90),
        "p95": rank(0.95),
        "min": ordered[0],
        "max": ordered[-1],
    }
    return {name: round(value, 3) for name, value in figures.items()} | {"n": len(ordered)}


def file_url(value: object) -> str | None:
    """The URL of one output file as gradio_client gives it when it does not download it (a FileData dict)."""
    return value.get("url") if isinstance(value, dict) else None


def answered(result: object, *, with_zip: bool) -> bool:
    """A Caption answer as the app promises it (`demo.CaptionAnswer`): a caption, one overlay per word titled with
    that word, and the export zip (`with_zip`) or none yet (the first answer)."""
    from demo import CaptionAnswer

    try:
        return CaptionAnswer.from_api(result).problem(with_zip=with_zip) is None
    except ValueError:
        return False


@dataclass
class Timing:
    first: float  # request sent -> the caption and the gallery answered, and every gallery picture fetched
    complete: float  # request sent -> the last answer, with the export zip, received
    ok: bool  # both answers complete and consistent, the pictures and the zip fetched, the zip readable


class CaptionCaller:
    """One API client of the Caption endpoint, as a page uses it: gradio_client sends the request and
    receives the answers without downloading their files, then the gallery's pictures are fetched over one
    kept-alive HTTP connection, as a browser loads them. (gradio_client's own downloads open a new HTTP
    client per file, about 22 ms of client-side work each, whatever the server does.) The zip is fetched
    and checked too, but outside the timings: a person downloads it only when they click it."""

    def __init__(self, url: str, photo: Path, model: str, beam_size: int) -> None:
        import httpx
        from gradio_client import Client

        self.client = Client(url, verbose=False, download_files=False)
        self.http = httpx.Client(timeout=REQUEST_TIMEOUT_S)
        self.arguments = (str(photo), model, beam_size)

    def __call__(self) -> Timing:
        from gradio_client import handle_file

        photo, model, beam_size = self.arguments
        start = time.perf_counter()
        job = self.client.submit(handle_file(photo), model, beam_size, api_name="/caption")
        answers = iter(job)
        first = next(answers, None)
        if first is None:  # no answer at all: the request failed; result() raises its error
            job.result(timeout=REQUEST_TIMEOUT_S)
            return Timing(math.nan, math.nan, ok=False)
        ok = answered(first, with_zip=False) and self.fetch_all(file_url(item["image"]) for item in first[1])
        first_s = time.perf_counter() - start
        last = first
        for last in answers:
            pass
        complete_s = time.perf_counter() - start
        ok = ok and answered(last, with_zip=True) and last[0] == first[0] and self.zip_readable(file_url(last[2]))
        return Timing(first_s, complete_s, ok)

    def fetch_all(self, urls: Iterable[str | None]) -> bool:
        return all(url is not None and self.http.get(url).status_code == 200 for url in urls)

    def zip_readable(self, url: str | None) -> bool:
        response = self.http.get(url) if url else None
        if response is None or response.status_code != 200:
            return False
        try:
            with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
                return any(name.endswith("caption.json") for name in archive.namelist()) and archive.testzip() is None
        except zipfile.BadZipFile:
            return False

    def close(self) -> None:
        self.http.close()
        self.client.close()


def time_handler(photo: Path, model: str, beam_size: int, requests: int, warmup: int = WARMUP) -> tuple[dict, dict]:
    """The Caption handler alone, in this process (a generator: its first answer, then the one with the
    zip): ({"first", "complete"} latency summaries, the last answer's sizes)."""
    import demo
    from captioning.bundled import CAPTION_CHECKPOINTS

    with tempfile.TemporaryDirectory(prefix="app-latency-handler-") as work:
        captioners, answerers = demo.load_models({model: CAPTION_CHECKPOINTS[model]}, {})
        handlers = demo.Handlers(captioners, answerers, Path(work))
        upload = {"path": str(photo), "orig_name": photo.name}
        timings: list[tuple[float, float]] = []
        for _ in range(warmup + requests):
            start = time.perf_counter()
            answers = handlers.caption(upload, model, beam_size)
            next(answers)
            first = time.perf_counter() - start
            *_, last = answers
            timings.append((first, time.perf_counter() - start))
        text, gallery, archive, _ = last
        shape = {
            "caption_words": len(text.split()),
            "gallery_items": len(gallery),
            "gallery_bytes": sum(Path(path).stat().st_size for path, _ in gallery),
            "zip_bytes": Path(archive).stat().st_size,
        }
    timings = timings[warmup:]
    return {"first": summary([f for f, _ in timings]), "complete": summary([c for _, c in timings])}, shape


def time_sequential(url: str, photo: Path, model: str, beam_size: int, requests: int, warmup: int = WARMUP) -> dict:
    """`requests` Caption requests in a row from one client: latency summaries and how many were answered."""
    caller = CaptionCaller(url, photo, model, beam_size)
    try:
        for _ in range(warmup):
            caller()
        timings = [caller() for _ in range(requests)]
    finally:
        caller.close()
    return {
        "first": summary([t.first for t in timings]),
        "complete": summary([t.complete for t in timings]),
        "answered": sum(t.ok for t in timings),
    }


def time_concurrent(url: str, photo: Path, model: str, beam_size: int, clients: int) -> dict:
    """`clients` threads, one client each (connected beforehand), each sending one Caption request at the
    same moment."""
    callers = [CaptionCaller(url, photo, model, beam_size) for _ in range(clients)]
    gate = threading.Barrier(clients + 1)
    timings: list[Timing | None] = [None] * clients
    errors: list[str] = []

    def one(index: int) -> None:
        gate.wait()
        try:
            timings[index] = callers[index]()
        except Exception as error:  # a refused or failed request counts as unanswered; its reason is kept
            errors.append(f"{type(error).__name__}: {error}"[:200])

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    gate.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join(REQUEST_TIMEOUT_S)
    wall = time.perf_counter() - start
    for caller in callers:
        caller.close()
    done = [t for t in timings if t is not None and t.ok]
    figures: dict = {"clients": clients, "answered": len(done), "wall_s": round(wall, 3)}
    for key in ("first", "complete"):
        if done:
            latencies = summary([getattr(t, key) for t in done])
            figures[key] = {"p50": latencies["median"], "p95": latencies["p95"], "max": latencies["max"]}
    if errors:
        figures["errors"] = sorted(set(errors))[:5]
    return figures


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/app_latency.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=int, default=20, help="sequential requests (and handler calls) timed (default 20)"
    )
    parser.add_argument(
        "--warmup", type=int, default=WARMUP, help=f"untimed requests (and handler calls) first (default {WARMUP})"
    )
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients, one request each (default 20)")
    parser.add_argument("--beam-size", type=int, default=3, help="beam width (default 3)")
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, choices=list(CAPTION_CHECKPOINTS), help=f"captioning model (default {DEFAULT_MODEL})"
    )
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the server child
    args = parser.parse_args(argv)
    if args.requests < 1 or args.clients < 1 or args.warmup < 0:
        parser.error("--requests and --clients must be at least 1, --warmup at least 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    if args.serve is not None:
        serve(args.serve)
        return
    with tempfile.TemporaryDirectory(prefix="app-latency-") as folder:
        photo = write_photo(Path(folder))
        child, url, server_cpus = start_server()
        try:
            sequential = time_sequential(url, photo, args.model, args.beam_size, args.requests, args.warmup)
            concurrent = time_concurrent(url, photo, args.model, args.beam_size, args.clients)
        finally:
            stop_server(child)
        # after the server is gone, so the handler has the CPUs to itself as it has in the server
        handler, shape = time_handler(photo, args.model, args.beam_size, args.requests, args.warmup)
    median = sequential["first"]["median"]
    figures = {
        "photo": f"{PHOTO_SIZE[0]}x{PHOTO_SIZE[1]} jpeg",
        "model": args.model,
        "beam_size": args.beam_size,
        "requests": args.requests,
        "sequential": sequential,
        "concurrent": concurrent,
        "handler": handler,
        "gradio_overhead_median": round(median - handler["first"]["median"], 3),
        "answer": shape,
        "server": server_cpus,
        "client": cpu_info(),
        "goal_met": median <= GOAL_S
        and sequential["answered"] == args.requests
        and concurrent["answered"] == args.clients,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
