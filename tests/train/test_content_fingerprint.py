"""The content fingerprint that tells a kept copy of host data its arrays changed in place.

Small arrays (labels, small data) are fingerprinted by the CRC of their bytes, large ones
of wide examples by the CRC of each example's word sums: both see a changed value and a
moved example; the small ones also two values swapped inside one example.
"""

import numpy as np

from tpukit.train._content import WHOLE_BYTES, content_fingerprint

rng = np.random.default_rng(7)


def test_values_swapped_inside_one_example_of_a_small_array_are_seen():
    x = rng.normal(size=(30, 5)).astype(np.float32)  # 600 bytes: fingerprinted whole
    before = content_fingerprint(x)
    x[4, [1, 3]] = x[4, [3, 1]]
    assert content_fingerprint(x) != before


def test_a_large_array_of_wide_examples_sees_a_value_a_moved_example_and_a_scaling():
    x = rng.random((300, 100), dtype=np.float32)  # 400-byte examples, over WHOLE_BYTES
    assert x.nbytes > WHOLE_BYTES
    before = content_fingerprint(x)
    assert content_fingerprint(x.copy()) == before
    assert content_fingerprint(np.asfortranarray(x)) == before  # the values, not the layout
    changed = x.copy()
    changed[299, 99] = np.nextafter(changed[299, 99], np.float32(2))
    assert content_fingerprint(changed) != before
    moved = x.copy()
    moved[[10, 250]] = moved[[250, 10]]
    assert content_fingerprint(moved) != before
    assert content_fingerprint(x / np.float32(255)) != before
    assert content_fingerprint(x.astype(np.float64)) != before


def test_large_labels_see_two_swapped_and_a_changed_one():
    y = np.arange(40_000, dtype=np.int32) % 10  # one word per example, over WHOLE_BYTES
    before = content_fingerprint(y)
    swapped = y.copy()
    swapped[[0, 39_999]] = swapped[[39_999, 0]]
    assert content_fingerprint(swapped) != before
    changed = y.copy()
    changed[20_000] += 1
    assert content_fingerprint(changed) != before
    assert content_fingerprint(y.copy()) == before


def test_odd_widths_and_empty_arrays_have_fingerprints():
    odd = rng.integers(0, 255, size=(5000, 27), dtype=np.uint8)  # 27-byte rows: bytes summed
    before = content_fingerprint(odd)
    odd[4999, 26] ^= 1
    assert content_fingerprint(odd) != before
    assert content_fingerprint(np.zeros((0, 3), np.float32)) != content_fingerprint(
        np.zeros((0, 4), np.float32)
    )
    assert content_fingerprint(np.float32(1.5)) == content_fingerprint(np.float32(1.5))
