"""Whole models: where an encoder comes from (source), its architecture (config), the float64
numpy reference forward (reference), the texts and token ids (inputs), the precision rules
(rules), the bytes a run holds (quantized), a run prepared with its references (prepared),
and what its outputs are worth (accuracy)."""
