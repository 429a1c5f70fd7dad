"""Datasets for the tutorials, downloaded once, checked, cached, and ready to train on.

Imports: ``tpukit._errors``.

It imports only NumPy and the standard library (no JAX): data is plain arrays
until ``fit`` puts it on the device (``tests/test_architecture.py`` checks this).

Example::

    from tpukit.datasets import mnist

    x_train, y_train = mnist("train")   # (60000, 784) float32 in [0, 1], int32 labels
    x_test, y_test = mnist("test")      # (10000, 784)

Offline, :func:`mnist` falls back to a sample of real MNIST bundled with tpukit and
warns with :class:`SampleDataWarning`; ``mnist(source=...)`` reads local files instead.
"""

from tpukit._errors import ChecksumError, DownloadError, IDXFormatError
from tpukit.datasets._idx import read_idx, write_idx
from tpukit.datasets._mnist import (
    CHECKSUMS,
    MIRRORS,
    MnistSourceError,
    MnistSourceNotFoundError,
    SampleDataWarning,
    Split,
    mnist,
)

__all__ = [
    "CHECKSUMS",
    "MIRRORS",
    "ChecksumError",
    "DownloadError",
    "IDXFormatError",
    "MnistSourceError",
    "MnistSourceNotFoundError",
    "SampleDataWarning",
    "Split",
    "mnist",
    "read_idx",
    "write_idx",
]
