"""A small Whisper for tests that need a browser run to be short: transformers'
WhisperForConditionalGeneration at d_model 64, 2 + 2 layers, seeded random weights, saved as a
local Hugging Face folder with tiny.en's tokenizer (its vocabulary size), so the harness loads
it like any user's model. Whisper's shape where it matters (80 mels, 1500 positions) is kept."""

from __future__ import annotations

import shutil
from pathlib import Path


def tiny_whisper(folder: Path, seed: int = 0) -> Path:
    import torch
    import transformers

    from fixed_web_platform.models import source

    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(seed)
    cfg = transformers.WhisperConfig(vocab_size=51864, d_model=64, encoder_layers=2, decoder_layers=2,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, num_mel_bins=80)
    net = transformers.WhisperForConditionalGeneration(cfg).eval()
    folder.mkdir(parents=True, exist_ok=True)
    net.save_pretrained(folder)
    packaged = source.resolve("whisper-tiny.en").folder
    assert packaged is not None
    shutil.copy(packaged / "tokenizer.json", folder / "tokenizer.json")
    return folder
