"""tpukit.datasets.mnist: download, verify, cache, parse, and fall back offline.

Downloads are served by a local ``http.server`` on 127.0.0.1 with tiny IDX files made
here, so the real download path runs without touching the network.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import pickle
import socket
import subprocess
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pooch
import pytest

from tpukit import TpukitError
from tpukit.datasets import (
    ChecksumError,
    DownloadError,
    IDXFormatError,
    SampleDataWarning,
    Split,
    mnist,
    read_idx,
    write_idx,
)
from tpukit.datasets._download import fetch

GZ_NAMES = {
    "x_train": "train-images-idx3-ubyte.gz",
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
}


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test reads the user's TPUKIT_MNIST or writes to the real cache."""
    monkeypatch.delenv("TPUKIT_MNIST", raising=False)
    monkeypatch.setenv("TPUKIT_CACHE", str(tmp_path / "default-cache"))


@pytest.fixture
def digits():
    """A tiny MNIST: 12 training and 5 test images of random bytes, and its IDX .gz files."""
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (12, 28, 28), dtype=np.uint8),
        "y_train": rng.integers(0, 10, 12, dtype=np.uint8),
        "x_test": rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
        "y_test": rng.integers(0, 10, 5, dtype=np.uint8),
    }
    files = {GZ_NAMES[k]: gzip.compress(write_idx(v), mtime=0) for k, v in arrays.items()}
    checksums = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return SimpleNamespace(arrays=arrays, files=files, checksums=checksums)


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1: ``routes[path] = (body, mode)``; unknown paths 404.

    mode ``"ok"`` sends the body; ``"cut"`` promises the whole body, sends half, and
    closes the connection, like a dropped download.
    """
    routes: dict[str, tuple[bytes, str]] = {}
    requests: list[str] = []
    agents: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            agents.append(self.headers.get("User-Agent", ""))
            if self.path not in routes:
                self.send_error(404)
                return
            body, mode = routes[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body if mode == "ok" else body[: len(body) // 2])
            self.close_connection = True

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"

    def serve(folder: str, files: dict[str, bytes], mode: str = "ok") -> str:
        for name, body in files.items():
            routes[f"/{folder}/{name}"] = (body, mode)
        return f"{url}/{folder}/"

    yield SimpleNamespace(url=url, serve=serve, requests=requests, agents=agents)
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/mnist/"


# IDX parsing


def test_idx_round_trips_every_type_gzipped_or_not():
    for dtype in ("u1", "i1", "i2", "i4", "f4", "f8"):
        array = np.arange(24, dtype=dtype).reshape(2, 3, 4)
        for data in (write_idx(array), gzip.compress(write_idx(array))):
            np.testing.assert_array_equal(read_idx(data), array)
    assert write_idx(np.zeros((60000, 28, 28), np.uint8))[:16].hex() == (
        "00000803" + "0000ea60" + "0000001c" + "0000001c"
    )


def test_idx_bad_magic_number_says_what_was_expected():
    data = b"\x12\x34\x08\x01" + b"\x00" * 8
    with pytest.raises(IDXFormatError, match=r"not an IDX file.*received 12 34 08 01"):
        read_idx(data)


def test_idx_truncated_or_bad_gzip_asks_for_a_new_download(tmp_path):
    data = write_idx(np.zeros((3, 28, 28), np.uint8))
    with pytest.raises(IDXFormatError, match="truncated or corrupt"):
        read_idx(data[:-10])
    path = tmp_path / "train-images-idx3-ubyte.gz"
    compressed = gzip.compress(data)
    path.write_bytes(compressed[: len(compressed) // 2])
    with pytest.raises(IDXFormatError, match=f"'{path}' looks gzipped.*download it again"):
        read_idx(path)


# Downloading


def test_download_verifies_caches_and_second_call_makes_no_request(tmp_path, server, digits):
    mirror = server.serve("a", digits.files)
    cache = tmp_path / "cache"
    kwargs = dict(cache_dir=cache, mirrors=[mirror], checksums=digits.checksums, progress=False)

    x, y = mnist("train", **kwargs)
    assert x.shape == (12, 784) and x.dtype == np.float32 and y.dtype == np.int32
    np.testing.assert_allclose(x, digits.arrays["x_train"].reshape(12, 784) / 255, rtol=1e-6)
    np.testing.assert_array_equal(y, digits.arrays["y_train"])
    assert _leftovers(cache) == ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]

    n_requests = len(server.requests)
    again = mnist("train", **kwargs)
    assert len(server.requests) == n_requests
    np.testing.assert_array_equal(again.images, x)
    assert again.source == str(cache) and not again.sample


def test_falls_back_to_the_second_mirror_when_the_first_404s(tmp_path, server, digits):
    good = server.serve("good", digits.files)
    missing = f"{server.url}/missing/"
    test = mnist(
        "test",
        cache_dir=tmp_path,
        mirrors=[missing, good],
        checksums=digits.checksums,
        progress=False,
    )
    np.testing.assert_array_equal(test.labels, digits.arrays["y_test"])
    assert server.requests == [
        "/missing/t10k-images-idx3-ubyte.gz",
        "/good/t10k-images-idx3-ubyte.gz",
        "/missing/t10k-labels-idx1-ubyte.gz",
        "/good/t10k-labels-idx1-ubyte.gz",
    ]


def test_npz_mirror_is_used_when_no_idx_mirror_answers(tmp_path, server, digits):
    npz = tmp_path / "mnist.npz"
    np.savez(npz, **digits.arrays)
    body = npz.read_bytes()
    server.serve("keras", {"mnist.npz": body})
    test = mnist(
        "test",
        cache_dir=tmp_path / "cache",
        mirrors=[f"{server.url}/missing/", f"{server.url}/keras/mnist.npz"],
        checksums={"mnist.npz": hashlib.sha256(body).hexdigest()},
        progress=False,
    )
    np.testing.assert_array_equal(test.labels, digits.arrays["y_test"])
    assert _leftovers(tmp_path / "cache") == ["mnist.npz"]


def test_checksum_mismatch_raises_and_caches_nothing(tmp_path, server, digits):
    mirror = server.serve("a", digits.files)
    wrong = dict(digits.checksums, **{"t10k-images-idx3-ubyte.gz": "0" * 64})
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError) as info:
        mnist("test", cache_dir=cache, mirrors=[mirror], checksums=wrong, progress=False)
    message = str(info.value)
    assert "t10k-images-idx3-ubyte.gz did not match its published SHA-256" in message
    assert "expected sha256 " + "0" * 64 in message
    assert digits.checksums["t10k-images-idx3-ubyte.gz"] in message
    assert _leftovers(cache) == []


def test_interrupted_download_leaves_no_file_and_tries_the_next_mirror(tmp_path, server, digits):
    cut = server.serve("cut", digits.files, mode="cut")
    good = server.serve("good", digits.files)
    cache = tmp_path / "cache"
    kwargs = dict(cache_dir=cache, checksums=digits.checksums, progress=False)

    with pytest.raises(DownloadError, match=r"broke off after \d[\d,]* of [\d,]+ bytes"):
        mnist("test", mirrors=[cut], fallback=False, **kwargs)
    assert _leftovers(cache) == []

    test = mnist("test", mirrors=[cut, good], **kwargs)
    np.testing.assert_array_equal(test.labels, digits.arrays["y_test"])
    assert _leftovers(cache) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


def test_offline_falls_back_to_the_bundled_sample_with_a_warning(tmp_path):
    with pytest.warns(
        SampleDataWarning, match="bundled sample of real MNIST: 10,000 training"
    ) as w:
        train = mnist("train", cache_dir=tmp_path, mirrors=[_closed_port_url()], progress=False)
    assert "unreachable" in w[0].message.download_errors  # why, for whoever asks
    assert train.sample and train.images.shape == (10_000, 784)
    assert "bundled MNIST sample" in repr(train)
    assert set(np.unique(train.labels)) == set(range(10))
    assert 0.0 <= train.images.min() and train.images.max() == 1.0

    with pytest.raises(DownloadError, match="unreachable"):
        mnist("test", cache_dir=tmp_path, mirrors=[_closed_port_url()], fallback=False)


def test_offline_warning_is_two_sentences_shown_once_per_session(tmp_path):
    script = (
        "import tpukit.datasets as d\n"
        f"kw = dict(cache_dir={str(tmp_path)!r}, mirrors=[{_closed_port_url()!r}], progress=False)\n"
        "d.mnist('train', **kw)\n"
        "d.mnist('test', **kw)\n"
        "d.mnist(('train', 'test'), **kw)\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("SampleDataWarning") == 1, done.stderr
    message = done.stderr.split("SampleDataWarning: ", 1)[1].splitlines()[0]
    assert len(message) < 300 and message.count(". ") <= 1 and "Could not download" not in message


def test_default_cache_follows_TPUKIT_CACHE(tmp_path, server, digits):
    mirror = server.serve("a", digits.files)
    mnist("test", mirrors=[mirror], checksums=digits.checksums, progress=False)
    cache = tmp_path / "default-cache" / "datasets" / "mnist"
    assert _leftovers(cache) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


# One file from several mirrors (fetch: pooch downloads and checks, tpukit tries mirrors)

BODY = bytes(range(256)) * 40  # 10,240 bytes
BODY_SHA256 = hashlib.sha256(BODY).hexdigest()


def test_fetch_caches_a_checked_file_and_then_answers_from_the_cache(tmp_path, server, capfd):
    mirror = server.serve("a", {"file.bin": BODY})
    cache = tmp_path / "cache"

    logged = logging.Handler()  # pooch's log line, to stderr, is kept quiet
    logged.emit = (records := []).append
    pooch.get_logger().addHandler(logged)
    try:
        path = fetch([mirror + "file.bin"], cache / "file.bin", BODY_SHA256, progress=True)
    finally:
        pooch.get_logger().removeHandler(logged)
    assert records == [] and pooch.get_logger().level == logging.NOTSET
    assert path == cache / "file.bin" and path.read_bytes() == BODY
    assert _leftovers(cache) == ["file.bin"]  # no temporary file left beside it
    assert server.agents == ["tpukit-datasets (+https://github.com/tpukit)"]
    assert "file.bin" in capfd.readouterr().err  # the progress bar names the file

    assert fetch([mirror + "file.bin"], cache / "file.bin", BODY_SHA256) == path
    assert len(server.requests) == 1  # the checked copy in the cache, no request

    path.write_bytes(b"damaged")  # a cached file that no longer checks out is fetched again
    fetch([mirror + "file.bin"], cache / "file.bin", BODY_SHA256, progress=False)
    assert path.read_bytes() == BODY and len(server.requests) == 2


def test_fetch_wrong_checksum_everywhere_raises_and_leaves_the_cache_empty(tmp_path, server):
    other = b"not the published file"
    first = server.serve("a", {"file.bin": other}) + "file.bin"
    second = server.serve("b", {"file.bin": other}) + "file.bin"
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError) as info:
        fetch([first, second], cache / "file.bin", BODY_SHA256, progress=False)
    message = str(info.value)
    received = hashlib.sha256(other).hexdigest()
    assert message.startswith("file.bin did not match its published SHA-256, so it was not cached")
    assert f"{first}: expected sha256 {BODY_SHA256}, received {received}" in message
    assert f"{second}: expected sha256 {BODY_SHA256}, received {received}" in message
    assert "set TPUKIT_MNIST" in message
    assert isinstance(info.value, TpukitError) and isinstance(info.value, ValueError)
    assert _leftovers(cache) == []


def test_fetch_a_wrong_file_on_one_mirror_is_skipped_for_the_right_one(tmp_path, server):
    wrong = server.serve("wrong", {"file.bin": b"x" * len(BODY)}) + "file.bin"
    right = server.serve("right", {"file.bin": BODY}) + "file.bin"
    path = fetch([wrong, right], tmp_path / "file.bin", BODY_SHA256, progress=False)
    assert path.read_bytes() == BODY and _leftovers(tmp_path) == ["file.bin"]


def test_fetch_first_mirror_down_second_serves(tmp_path, server):
    down = _closed_port_url() + "file.bin"
    up = server.serve("up", {"file.bin": BODY}) + "file.bin"
    path = fetch([down, up], tmp_path / "file.bin", BODY_SHA256, progress=False)
    assert path.read_bytes() == BODY
    assert server.requests == ["/up/file.bin"]


def test_fetch_every_mirror_down_names_each_mirror_and_why(tmp_path, server):
    down = _closed_port_url() + "file.bin"
    missing = f"{server.url}/missing/file.bin"
    cut = server.serve("cut", {"file.bin": BODY}, mode="cut") + "file.bin"
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as info:
        fetch([down, missing, cut], cache / "file.bin", BODY_SHA256, progress=False)
    lines = str(info.value).splitlines()
    assert lines[0] == "Could not download file.bin from any mirror:"
    assert lines[1].startswith(f"  {down}: unreachable (")
    assert lines[2] == f"  {missing}: HTTP 404 Not Found"
    # the server promises 10,240 bytes and sends half: 5,120
    assert lines[3] == f"  {cut}: transfer broke off after 5,120 of 10,240 bytes"
    assert "set TPUKIT_MNIST" in lines[4]
    assert isinstance(info.value, TpukitError) and isinstance(info.value, OSError)
    assert _leftovers(cache) == []


def test_pooch_loads_on_the_first_download_not_with_tpukit():
    # pooch imports tqdm.auto, which warns in red in a Jupyter kernel without ipywidgets
    script = "import sys, tpukit.datasets; print(sorted({'pooch', 'requests'} & set(sys.modules)))"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_fetch_without_mirrors_says_to_pass_one(tmp_path):
    with pytest.raises(DownloadError, match="No mirror given for file.bin"):
        fetch([], tmp_path / "file.bin", BODY_SHA256)


# Local sources


def test_local_folder_of_idx_files_gzipped_or_raw(tmp_path, digits):
    for name, data in digits.files.items():
        (tmp_path / "gz").mkdir(exist_ok=True)
        (tmp_path / "gz" / name).write_bytes(data)
        (tmp_path / "raw").mkdir(exist_ok=True)
        (tmp_path / "raw" / name.removesuffix(".gz")).write_bytes(gzip.decompress(data))
    for folder in ("gz", "raw"):
        x, y = mnist("test", source=tmp_path / folder, dtype="uint8", flatten=False)
        np.testing.assert_array_equal(x[..., 0], digits.arrays["x_test"])
        assert x.shape == (5, 28, 28, 1) and x.dtype == np.uint8


def test_local_npz_and_the_TPUKIT_MNIST_variable(tmp_path, monkeypatch, digits):
    path = tmp_path / "mnist.npz"
    np.savez(path, **digits.arrays)
    x, _ = mnist("train", source=path)
    np.testing.assert_allclose(x * 255, digits.arrays["x_train"].reshape(12, 784), atol=1e-4)
    monkeypatch.setenv("TPUKIT_MNIST", str(tmp_path))
    assert mnist("test").source == str(tmp_path)


def test_local_classic_pickle_gives_exact_bytes_and_60k_style_train(tmp_path, digits):
    rng = np.random.default_rng(1)
    train_x = rng.integers(0, 256, (8, 784), dtype=np.uint8)
    valid_x = rng.integers(0, 256, (4, 784), dtype=np.uint8)
    labels = rng.integers(0, 10, 12)
    pairs = (
        (train_x.astype(np.float32) / 256, labels[:8]),
        (valid_x.astype(np.float32) / 256, labels[8:]),
        (digits.arrays["x_test"].reshape(5, 784).astype(np.float32) / 256, digits.arrays["y_test"]),
    )
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        path = tmp_path / f"mnist{protocol}.pkl.gz"
        with gzip.open(path, "wb") as f:
            pickle.dump(pairs, f, protocol=protocol)
        train, val = mnist(["train", "validation"], source=path, dtype="uint8", validation_size=4)
        np.testing.assert_array_equal(train.images, train_x)
        np.testing.assert_array_equal(val.images, valid_x)
        np.testing.assert_array_equal(np.concatenate([train.labels, val.labels]), labels)


def test_pickle_that_would_run_code_is_refused(tmp_path):
    path = tmp_path / "mnist.pkl.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump(SimpleNamespace(), f)
    with pytest.raises(ValueError, match="refusing to load types.SimpleNamespace"):
        mnist(source=path)


def test_explicit_sample_source_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        test = mnist("test", source="sample")
    assert isinstance(test, Split) and test.sample and len(test) == 2_000


# Splits, shapes and mistakes


def test_validation_split_by_count_or_fraction(tmp_path, digits):
    np.savez(tmp_path / "mnist.npz", **digits.arrays)
    train, val, test = mnist(["train", "validation", "test"], source=tmp_path, validation_size=3)
    assert (len(train), len(val), len(test)) == (9, 3, 5)
    np.testing.assert_array_equal(val.labels, digits.arrays["y_train"][9:])
    assert len(mnist("validation", source=tmp_path, validation_size=0.25)) == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (dict(split="training"), ValueError, r"split to be one of 'train'.*received 'training'"),
        (dict(split="validation"), ValueError, "needs validation_size > 0"),
        (dict(validation_size=12), ValueError, "from 0 to 11 or a fraction"),
        (dict(dtype="int64"), ValueError, "float type .* or 'uint8'.*received int64"),
    ],
)
def test_mistakes_say_what_was_expected(tmp_path, digits, kwargs, error, pattern):
    np.savez(tmp_path / "mnist.npz", **digits.arrays)
    with pytest.raises(error, match=pattern):
        mnist(source=tmp_path, **kwargs)


def test_bad_sources_say_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist. Pass source="):
        mnist(source=tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="holds no MNIST files"):
        mnist(source=tmp_path)
    (tmp_path / "digits.csv").write_text("1,2,3")
    with pytest.raises(ValueError, match=r"cannot read: expected a \.npz"):
        mnist(source=tmp_path / "digits.csv")
    (tmp_path / "mnist.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable MNIST .npz"):
        mnist(source=tmp_path / "mnist.npz")
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"\x12\x34\x08\x03")
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(write_idx(np.zeros(1, np.uint8)))
    with pytest.raises(IDXFormatError, match="not an IDX file"):
        mnist("test", source=tmp_path)
