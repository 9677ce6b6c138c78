"""Each kernel set's decode layout: how the model runner groups a step's decode rows and whether it zeroes fresh
blocks (kernels/decode_layout.py)."""

from __future__ import annotations

from kernels import get_kernels
from kernels.decode_layout import EXACT_LENGTH_READS, PADDED_BLOCK_READS, DecodeLayout


def test_padded_reads_group_rows_of_similar_length_and_cap_the_group() -> None:
    lens = [10, 11, 12, 100, 101, 400]
    groups = PADDED_BLOCK_READS.group_rows(lens)
    assert groups == [(0, 3), (3, 5), (5, 6)]
    for start, end in groups:  # padding to the group's longest row wastes at most max_pad_waste of it
        longest = lens[end - 1]
        assert 1 - sum(lens[start:end]) / (longest * (end - start)) <= PADDED_BLOCK_READS.max_pad_waste
    assert PADDED_BLOCK_READS.group_rows([50] * 130) == [(0, 64), (64, 128), (128, 130)]
    assert DecodeLayout(reads_padding=True, max_pad_waste=1.0, max_group=1000).group_rows(lens) == [(0, 6)]
    assert PADDED_BLOCK_READS.group_rows([]) == [] and PADDED_BLOCK_READS.zero_fresh_blocks


def test_exact_length_reads_take_every_row_in_one_call_without_zeroing() -> None:
    assert EXACT_LENGTH_READS.group_rows([10, 11, 12, 100, 101, 400] * 30) == [(0, 180)]
    assert not EXACT_LENGTH_READS.zero_fresh_blocks


def test_the_reference_kernels_read_padding_and_the_native_ones_do_not() -> None:
    assert get_kernels("cpu", prefer="reference").decode_layout is PADDED_BLOCK_READS
    native = get_kernels("cpu")
    if native.backend.endswith("cpu-native"):
        assert native.decode_layout is EXACT_LENGTH_READS
