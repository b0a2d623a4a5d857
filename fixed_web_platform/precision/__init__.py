"""Precision: the numpy quantization reference (quant.py) and which WebNN data types a run uses
(webnn_precision.py)."""
