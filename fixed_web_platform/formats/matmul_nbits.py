"""ONNX Runtime's ``MatMulNBits`` (com.microsoft) layout, from the bytes the harness holds
(precision/held.py, prepared unsigned): B is the packed weights as they are (row-major W[N, K],
first element in the lowest bits: MatMulNBits' [N, blocks, blob]), scales as they are, and zero
points repacked per row (MatMulNBits pads each row's zero points to whole bytes), or float32 ones as
they are (the quantizers that keep a float zero per block; ORT's CPU kernel takes them at 4 and 2
bits). MatMulNBits computes (q - zero_point) * scale with either.
"""

from __future__ import annotations

import numpy as np

from ..precision.held import FLOAT_ZERO, HeldWeights

MS_DOMAIN = "com.microsoft"
"""The operator domain of MatMulNBits (onnxruntime's contrib operators)."""


def _unpack_rows(packed: bytes, bits: int, rows: int, per_row: int) -> np.ndarray:
    """Values packed contiguously (first element in the lowest bits), as a [rows, per_row] array."""
    flat = np.frombuffer(packed, dtype=np.uint8)
    per_byte = 8 // bits
    values = np.stack([(flat >> (bits * i)) & ((1 << bits) - 1) for i in range(per_byte)], axis=1)
    return values.reshape(-1)[: rows * per_row].reshape(rows, per_row)


def _pack_rows(values: np.ndarray, bits: int) -> np.ndarray:
    """Each row packed to whole bytes (first element in the lowest bits)."""
    per_byte = 8 // bits
    rows, count = values.shape
    padded = np.zeros((rows, -(-count // per_byte) * per_byte), dtype=np.uint8)
    padded[:, :count] = values
    grouped = padded.reshape(rows, -1, per_byte).astype(np.uint16)
    return sum(grouped[:, :, i] << (bits * i) for i in range(per_byte)).astype(np.uint8)


def nbits_zero_points(zero_points: bytes, bits: int, n: int, blocks: int, float_zero: bool) -> np.ndarray:
    """MatMulNBits' zero points from the harness's: float32 ones as they are (one per block; ORT's
    CPU kernel takes them), or packed ones repacked per row (each row padded to whole bytes)."""
    if float_zero:
        return np.frombuffer(zero_points, dtype="<f4")[: n * blocks].copy()
    return _pack_rows(_unpack_rows(zero_points, bits, n, blocks), bits).reshape(-1)


def nbits_initializers(held: HeldWeights, k: int, n: int, bits: int, block_size: int) -> tuple[np.ndarray, ...]:
    """MatMulNBits' B [n, blocks, blob], scales [n * blocks], zero points [n * ceil(blocks * bits / 8)]
    (or float32 [n * blocks] from a quantizer that keeps a float zero) from the harness's unsigned
    packed bytes ``held`` (precision/held.HeldWeights)."""
    t = held.tensors
    blocks = k // block_size
    blob = block_size * bits // 8
    b = np.frombuffer(t["w"], dtype=np.uint8)[: n * blocks * blob].reshape(n, blocks, blob).copy()
    sc = np.frombuffer(t["scales"], dtype="<f4")[: n * blocks].copy()
    zp = nbits_zero_points(t["zero_points"], bits, n, blocks, held.zero_point_dtype == FLOAT_ZERO)
    return b, sc, zp
