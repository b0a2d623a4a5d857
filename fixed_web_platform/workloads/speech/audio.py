"""Speech clips: the built-in evaluation set (data/sentences.txt spoken by espeak-ng), a user's
folder of WAV files (``--inputs DIR`` with an optional transcripts.txt), reading WAV files as
16 kHz mono float32, and Whisper's log-mel features (transformers' WhisperFeatureExtractor, the
references' front end).

The built-in clips are made on first use, not stored in the repository: espeak-ng (a Debian
package scripts/setup.sh installs) speaks each sentence at a fixed voice and speed in well
under a second, and the sentences, voice and speed are what identify the set. They are written
to ``.cache/speech/`` under a name that holds espeak-ng's version and the set's hash, so another
espeak-ng build makes another set rather than silently different audio under the same name.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...architectures.whisper.config import CHUNK_SECONDS, SAMPLE_RATE
from ...files import replacing
from ...paths import PROJECT_ROOT

SENTENCES = Path(__file__).parent / "data" / "sentences.txt"
VOICE = "en-us"
SPEED_WPM = 150
CACHE = PROJECT_ROOT / ".cache" / "speech"
TRANSCRIPTS = "transcripts.txt"
BUILTIN_NAME = "built-in"


@dataclass(frozen=True)
class Clip:
    name: str
    """The file name (outputs and tables say it)."""
    path: str
    reference: str
    """What was said ('' when the user gave no transcript: accuracy is then against fp32 only)."""


def builtin_sentences() -> list[str]:
    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _espeak() -> str:
    found = shutil.which("espeak-ng")
    if found is None:
        raise ValueError("the built-in speech clips need espeak-ng (scripts/setup.sh installs it: apt-get install "
                         "espeak-ng), or give your own WAV files with --inputs DIR")
    return found


@functools.cache
def _espeak_version(program: str) -> str:
    out = subprocess.run([program, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"\d+\.\d+(\.\d+)?", out)
    return found.group(0) if found else "unknown"


def builtin_clips(count: int | None = None) -> tuple[Clip, ...]:
    """The first ``count`` built-in clips (all by default), spoken now if not cached."""
    sentences = builtin_sentences()
    if count is not None and not 1 <= count <= len(sentences):
        raise ValueError(f"--clips must be between 1 and {len(sentences)} (the built-in set), got {count}")
    return spoken(sentences)[:count]


def spoken(sentences: Sequence[str]) -> tuple[Clip, ...]:
    """``sentences`` spoken by espeak-ng (VOICE, SPEED_WPM), cached under a name that holds
    espeak-ng's version and the whole set's hash; clip ``i`` is ``clip{i:02d}.wav``."""
    program = _espeak()
    version = _espeak_version(program)
    digest = hashlib.sha256("\n".join([VOICE, str(SPEED_WPM), *sentences]).encode()).hexdigest()[:12]
    folder = CACHE / f"espeak-ng-{version}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    clips = []
    for i, text in enumerate(sentences):
        path = folder / f"clip{i:02d}.wav"
        if not path.is_file():
            with replacing(path) as partial:
                subprocess.run([program, "-v", VOICE, "-s", str(SPEED_WPM), "-w", str(partial), text],
                               check=True, capture_output=True)
        clips.append(Clip(path.name, str(path), text))
    return tuple(clips)


def folder_clips(folder: Path | str) -> tuple[Clip, ...]:
    """A user's WAV files (sorted by name) and their transcripts: ``transcripts.txt`` lines
    ``<file name> <text>`` (or ``<file name>\\t<text>``); no file: no references."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"--inputs {folder}: not a folder of WAV files")
    wavs = sorted(p for p in root.iterdir() if p.suffix.lower() == ".wav")
    if not wavs:
        raise ValueError(f"--inputs {folder}: no .wav files in it")
    references: dict[str, str] = {}
    listing = root / TRANSCRIPTS
    if listing.is_file():
        for n, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            name, _, text = line.strip().partition("\t") if "\t" in line else line.strip().partition(" ")
            if name not in {w.name for w in wavs}:
                raise ValueError(f"{listing}:{n}: {name!r} is not a .wav file in {folder}")
            references[name] = text.strip()
        missing = [w.name for w in wavs if w.name not in references]
        if missing:
            raise ValueError(f"{listing}: no transcript for {missing[0]}" +
                             (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    clips = tuple(Clip(w.name, str(w.resolve()), references.get(w.name, "")) for w in wavs)
    for clip in clips:
        read_wav(clip.path)  # a file that does not read fails now, in one line
    return clips


@functools.lru_cache(maxsize=64)
def read_wav(path: str) -> np.ndarray:
    """16 kHz mono float32 in [-1, 1] (channels averaged, resampled with a polyphase filter);
    ValueError (one line) for a file that is not a readable PCM WAV or longer than 30 s."""
    from math import gcd

    from scipy.io import wavfile
    from scipy.signal import resample_poly

    try:
        rate, data = wavfile.read(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable WAV file ({str(exc).splitlines()[0][:120]})") from None
    if data.dtype.kind == "i":
        x = data.astype(np.float64) / float(np.iinfo(data.dtype).max + 1)
    elif data.dtype.kind == "u":
        x = (data.astype(np.float64) - 128.0) / 128.0
    else:
        x = data.astype(np.float64)
    if x.ndim == 2:
        x = x.mean(axis=1)
    if rate != SAMPLE_RATE:
        g = gcd(int(rate), SAMPLE_RATE)
        x = resample_poly(x, SAMPLE_RATE // g, int(rate) // g)
    if len(x) == 0:
        raise ValueError(f"{path}: the WAV file holds no samples")
    if len(x) > CHUNK_SECONDS * SAMPLE_RATE:
        raise ValueError(f"{path}: {len(x) / SAMPLE_RATE:.1f} s is longer than one {CHUNK_SECONDS}-second window "
                         "(longer clips are not supported yet)")
    return np.clip(x, -1.0, 1.0).astype(np.float32)


@functools.cache
def feature_extractor(mels: int):  # noqa: ANN201 - transformers' class
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(feature_size=mels)


def features(samples: np.ndarray, mels: int) -> np.ndarray:
    """Whisper's log-mel features [mels, 3000] of one clip (padded to 30 s), float32."""
    out = feature_extractor(mels)(samples, sampling_rate=SAMPLE_RATE, return_tensors="np")
    return np.asarray(out["input_features"][0], dtype=np.float32)
