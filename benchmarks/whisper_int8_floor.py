"""Whisper's W8A8 at other output floors, in the browser: what ``SpeechClips.out_min_sqnr_db``
(workloads/speech/calibration.py) trades. Each floor is one harness WebNN W8A8 row (per-channel
8-bit weights in ``gemm_qdq``, per-token inputs, smoothed; the layers whose int8 outputs miss the
floor held in float32), beside one float32 row of the same run, on the built-in clips in
Chromium:

    .venv/bin/python benchmarks/whisper_int8_floor.py [--floors 35 38 41] [--clips 30]
        [--output-dir results/whisper-int8-floor]

Each floor's folder (``<output-dir>/<floor>db``) is a result folder as any sweep writes; a floor
whose folder has its rows is not run again (resumable). The table: the floor, layers with int8
outputs, decode ids/s and its ratio to float32's in the same folder, WER against fp32's
transcripts, clips equal to fp32's, and the kernel check. About 3 minutes a floor here (2 cores,
30 clips).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.cli.main import main as cli_main  # noqa: E402
from fixed_web_platform.prepared_caches import release  # noqa: E402
from fixed_web_platform.workloads.speech import calibration  # noqa: E402


def run_floor(floor: float, clips: int, out: Path) -> pd.DataFrame:
    if not (out / "results.csv").is_file():
        calibration.SpeechClips.out_min_sqnr_db = floor
        release()  # nothing calibrated at another floor is reused
        code = cli_main(["--model", "whisper-tiny.en", "--clips", str(clips), "--engine", "harness",
                         "--platform", "webnn", "--browser", "chrome", "--bits", "32", "8", "--act-bits", "32", "8",
                         "--granularity", "per-channel", "--no-report", "--output-dir", str(out)])
        if code:
            raise SystemExit(f"the sweep at {floor:g} dB exited with {code}")
    return pd.read_csv(out / "results.csv", keep_default_na=False)


def line(floor: float, rows: pd.DataFrame, out: Path) -> str:
    fp32 = rows[(rows.bits_requested == 32) & (rows.act_bits == 32)].iloc[0]
    w8a8 = rows[(rows.bits_requested == 8) & (rows.act_bits == 8)].iloc[0]
    layers = pd.read_csv(out / "layers.csv", keep_default_na=False)
    mine = layers[layers.run_id == w8a8.run_id]
    int8 = int((mine.act_dtype != "").sum())
    speed = float(w8a8.decode_tokens_per_s) / float(fp32.decode_tokens_per_s)
    return (f"| {floor:g} | {w8a8.outcome} | {int8} of {len(mine)} | {float(w8a8.decode_tokens_per_s):.1f} "
            f"({speed:.2f}x {float(fp32.decode_tokens_per_s):.1f}) | {float(w8a8.wer_vs_fp32):.2%} | "
            f"{int(w8a8.clips_equal_fp32)} of {int(w8a8.clips)} | "
            f"{float(w8a8.rel_error_vs_dequantized):.1g} / {float(w8a8.kernel_tolerance):.2g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floors", type=float, nargs="+", default=[35.0, 38.0, 41.0])
    parser.add_argument("--clips", type=int, default=30)
    parser.add_argument("--output-dir", type=Path, default=Path("results/whisper-int8-floor"))
    args = parser.parse_args()
    lines = ["| floor dB | outcome | int8 layers | decode ids/s (over float32) | WER vs fp32 | clips = fp32 | "
             "kernel err / tol |", "|---|---|---|---|---|---|---|"]
    for floor in args.floors:
        out = args.output_dir / f"{floor:g}db"
        lines.append(line(floor, run_floor(floor, args.clips, out), out))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
