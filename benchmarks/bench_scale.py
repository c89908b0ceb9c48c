"""Peak resident memory of training on 100k versus 2M synthetic sentences (flat is the target).

Each run is a fresh `cselab train` process (MiniLM base, batch 64, 20 steps) whose RSS is sampled
every 50 ms with psutil; the corpus is a generated text file read through the on-disk line index.

    python benchmarks/bench_scale.py [--sizes 100000,2000000] [--steps 20]
"""
from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

WORDS = ("time year people way day man thing woman life child world school state family student group country "
         "problem hand part place case week company system program question work government number night point "
         "home water room mother area money story fact month lot right study book eye job word business issue "
         "side kind head house service friend father power hour game line end member law car city community "
         "name").split()


def make_corpus(path: Path, size: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(size):
            handle.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))).capitalize() + ".\n")


def peak_rss(command: list[str]) -> tuple[float, float]:
    import psutil

    start = time.perf_counter()
    process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while process.poll() is None:
        try:
            rss = process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    if process.returncode != 0:
        raise SystemExit(f"training failed: {process.stderr.read().decode()[-2000:]}")
    return peak / 2**20, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,2000000")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="cselab-scale-") as tmp:
        for size in [int(s) for s in args.sizes.split(",")]:
            corpus = Path(tmp) / f"corpus-{size}.txt"
            make_corpus(corpus, size)
            command = [sys.executable, "-m", "cselab.cli", "train", "--corpus", str(corpus), "--output-dir",
                       str(Path(tmp) / f"run-{size}"), "--max-steps", str(args.steps),
                       "--set", "data.max_sentences=null", "--set", "train.eval_steps=0",
                       "--set", "train.save_steps=0", "--no-resume"]
            rss, seconds = peak_rss(command)
            results[size] = {"peak_rss_mib": round(rss, 1), "wall_seconds": round(seconds, 1),
                             "corpus_mib": round(corpus.stat().st_size / 2**20, 1)}
            print(size, results[size], flush=True)
    sizes = sorted(results)
    ratio = results[sizes[-1]]["peak_rss_mib"] / results[sizes[0]]["peak_rss_mib"]
    rows = [[f"{s:,}", results[s]["corpus_mib"], results[s]["peak_rss_mib"], results[s]["wall_seconds"]] for s in sizes]
    rows.append(["ratio largest / smallest", "", round(ratio, 3), ""])
    write_results("scale_memory", {"results": results, "rss_ratio": ratio, "steps": args.steps},
                  "Peak memory of training vs corpus size", ["sentences", "corpus MiB", "peak RSS MiB", "wall s"], rows,
                  notes=f"Target: flat within 10% (ratio <= 1.10). Command: python benchmarks/bench_scale.py "
                        f"--sizes {args.sizes} --steps {args.steps}")


if __name__ == "__main__":
    main()
