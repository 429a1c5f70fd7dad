"""Rebuild ``data/mnist_sample.npz``, the offline fallback, from the classic MNIST pickle.

The sample is the first 10,000 training and first 2,000 test images of MNIST, stored
as uint8 in the keras ``mnist.npz`` layout (``x_train``, ``y_train``, ``x_test``,
``y_test``), so the same loader reads both. The pickle's pixels are bytes divided by
256 and are turned back into the exact original bytes. The arrays are deterministic
(the zip timestamps inside the .npz are not).

Example::

    python -m tpukit.datasets.make_sample /path/to/mnist.pkl.gz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from tpukit.datasets._mnist import SAMPLE_PATH, _load_pickle

N_TRAIN = 10_000
N_TEST = 2_000


def make_sample(pickle_path: str | Path, out: str | Path = SAMPLE_PATH) -> Path:
    """Write the first ``N_TRAIN`` training and ``N_TEST`` test images of MNIST to ``out``."""
    parts = _load_pickle(Path(pickle_path), {"train", "test"})
    (x_train, y_train), (x_test, y_test) = parts["train"], parts["test"]
    out = Path(out)
    np.savez_compressed(
        out,
        x_train=x_train[:N_TRAIN],
        y_train=y_train[:N_TRAIN].astype(np.uint8),
        x_test=x_test[:N_TEST],
        y_test=y_test[:N_TEST].astype(np.uint8),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pickle", help="the classic mnist.pkl.gz")
    parser.add_argument("--out", default=str(SAMPLE_PATH), help="where to write the .npz")
    args = parser.parse_args()
    path = make_sample(args.pickle, args.out)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
