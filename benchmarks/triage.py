"""`envmgr triage` on big, realistic SGLang logs, side by side with `grep -E` over the same
patterns, and the memory it needs.

    python benchmarks/triage.py [--sizes 1,10,100] [--runs 3] [--json]

Each log is a real SGLang 0.5.11 startup on an H200 (tests/fixtures/triage/
clean_h200_sglang_0.5.11_serving.log), its real serving lines (prefill and decode batch
statistics, HTTP access lines) repeated with new numbers up to the size, and a real crash at
the end (a CUDA OOM, tests/fixtures/triage/cuda_oom_moss_ttsd_71_sglang.log), so the run must
find `cuda_oom` on the last line. grep gets every pattern triage matches lines with
(signatures and context values), translated to POSIX ERE, and counts matching lines; triage
reads the file, cleans and matches what its prefilter lets through, and prints JSON.
Reported: the median wall time of each, their ratio, and triage's peak RSS (from wait4).
The launcher's live path is measured too: the same log fed line by line to ``Triage.feed``
in one process (``feed_s``, ``feed_us_per_line``), as the reader thread feeds a running
server's output.

``--tracebacks K`` writes the worst case for the prefilter too: every K seconds of serving, the
caught traceback the same startup logs (its "Can not initialize OpenAIServingResponses" and the
frames after it), whose every line is a candidate. ``--tracebacks 1`` makes a quarter of the log
traceback lines.

Targets (issue 11): triage <= 10x grep, <= 80 MiB peak, at 100 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "triage"
SERVING = FIXTURES / "clean_h200_sglang_0.5.11_serving.log"
CRASH = FIXTURES / "cuda_oom_moss_ttsd_71_sglang.log"
STEADY = ("Prefill batch", "Decode batch", '"POST /generate', '"GET /')


def make_log(path: Path, size: int, seed: int = 0, tracebacks: int = 0) -> int:
    """Write a log of about ``size`` bytes (a caught traceback every ``tracebacks`` seconds of
    serving, if not 0); return its line count."""
    rng = random.Random(seed)
    lines = SERVING.read_text(encoding="utf-8").splitlines()
    ready = next(i for i, line in enumerate(lines) if "fired up and ready" in line)
    head = lines[:ready + 1]
    caught = next(i for i, line in enumerate(lines) if "Can not initialize OpenAIServingResponses" in line)
    traceback = lines[caught:lines.index("", caught)]  # the real lines, up to the blank one after them
    steady = [line for line in lines[ready + 1:] if any(s in line for s in STEADY)]
    crash = CRASH.read_text(encoding="utf-8").splitlines()
    count, written = 0, 0
    with open(path, "w", encoding="utf-8") as out:
        for line in head:
            out.write(line + "\n")
            written += len(line) + 1
            count += 1
        second = 0
        while written < size:
            second += 1
            stamp = f"[2026-12-01 {8 + second // 3600 % 16:02d}:{second // 60 % 60:02d}:{second % 60:02d}]"
            if tracebacks and second % tracebacks == 0:
                for line in traceback:
                    out.write(line + "\n")
                    written += len(line) + 1
                    count += 1
            for line in rng.sample(steady, k=min(len(steady), 12)):
                # new numbers in the same places: real shapes, not one line repeated
                line = re.sub(r"\d+(?=\D*$)", lambda m: str(rng.randrange(1, 60000)), line, count=1)
                line = stamp + line.split("]", 1)[1]
                out.write(line + "\n")
                written += len(line) + 1
                count += 1
        for line in crash:
            out.write(line + "\n")
            count += 1
    return count


def ere(pattern: str) -> str:
    """A Python regex as POSIX ERE for GNU grep (the subset the signatures use)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(("0-9" if in_class else "[0-9]") if nxt == "d" else c + nxt)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif pattern.startswith("(?P<", i):
            i = pattern.index(">", i) + 1
            out.append("(")
            continue
        elif pattern.startswith("(?:", i):
            i += 3
            out.append("(")
            continue
        elif c in "*+?" and pattern[i + 1:i + 2] == "?":  # lazy -> greedy: same lines match
            out.append(c)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def patterns() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from envmgr.bench.triage import load_signatures

    return [p.pattern for p in load_signatures().matched_patterns()]


def timed(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in KiB and stdout of one process."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return wall, usage.ru_maxrss, out.read().decode()


FEED = """
import sys, time
from envmgr.bench.triage import Triage
triage = Triage()
start = time.perf_counter()
with open(sys.argv[1], encoding="utf-8", errors="replace") as log:
    for line in log:
        triage.feed(line.rstrip("\\n"))
triage.close()
print(time.perf_counter() - start, [f.id for f in triage.findings() if f.severity == "error"])
"""


def envmgr() -> list[str]:
    script = shutil.which("envmgr")
    return [script] if script else [sys.executable, "-m", "envmgr"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="log sizes in MB (default: 1,10,100)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tracebacks", type=int, default=0, metavar="K",
                        help="a caught traceback every K seconds of serving (default: none)")
    args = parser.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        sys.exit("grep is not installed")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        pattern_file = Path(tmp) / "patterns.txt"
        pattern_file.write_text("\n".join(ere(p) for p in patterns()) + "\n", encoding="utf-8")
        subprocess.run([*envmgr(), "--version"], capture_output=True, check=True)  # warm caches
        for mb in (float(s) for s in args.sizes.split(",")):
            log = Path(tmp) / f"server-{mb:g}MB.log"
            lines = make_log(log, int(mb * 1_000_000), tracebacks=args.tracebacks)
            grep_runs, triage_runs, rss = [], [], []
            for _ in range(args.runs):
                wall, _, out = timed([grep, "-c", "-E", "-f", str(pattern_file), str(log)])
                grep_runs.append(wall)
                grep_lines = int(out.strip() or 0)
                wall, peak, out = timed([*envmgr(), "triage", "--json", str(log)])
                triage_runs.append(wall)
                rss.append(peak)
                findings = json.loads(out)
            _, feed_peak, out = timed([sys.executable, "-c", FEED, str(log)])
            feed_s, feed_ids = out.split(" ", 1)
            found = [(f["id"], f["line"]) for f in findings if f["severity"] == "error"]
            if feed_ids.strip() != str([i for i, _ in found]):
                sys.exit(f"{log.name}: the live path found {feed_ids.strip()}, the batch path {found}")
            if ("cuda_oom", lines) not in found or (not args.tracebacks and len(found) > 1):
                sys.exit(f"{log.name}: expected cuda_oom on line {lines}, got {found}")
            row = {"size_mb": mb, "bytes": log.stat().st_size, "lines": lines,
                   "grep_s": round(statistics.median(grep_runs), 3), "grep_matching_lines": grep_lines,
                   "triage_s": round(statistics.median(triage_runs), 3),
                   "triage_peak_mib": round(max(rss) / 1024, 1)}
            row["ratio"] = round(row["triage_s"] / row["grep_s"], 1)
            row["feed_s"] = round(float(feed_s), 3)
            row["feed_us_per_line"] = round(float(feed_s) / lines * 1e6, 2)
            results.append(row)
            if not args.json:
                print(f"{mb:6g} MB {lines:>9,} lines  grep -E {row['grep_s']:7.3f} s  "
                      f"triage {row['triage_s']:7.3f} s  = {row['ratio']:5.1f}x grep  "
                      f"peak {row['triage_peak_mib']:6.1f} MiB  live feed {row['feed_us_per_line']:5.2f} us/line",
                      flush=True)
    if args.json:
        print(json.dumps({"command": envmgr(), "runs": args.runs, "tracebacks": args.tracebacks,
                          "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
