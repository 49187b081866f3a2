"""A synthetic image dataset on disk, in two layouts, built once and reused.

Images are RGB with structure (gradients, a few filled shapes, a texture and noise), so the
JPEG encoder and decoder do real work.  They are written as

* TFRecord shards (``tfrecord/shard-00000-of-00008.tfrecord``), each record an
  ``tf.train.Example`` with the JPEG bytes and a label; and
* one JPEG file per image (``files/00000/img-000000.jpg``): the "many small files" layout.

The dataset lives in a cache directory keyed by its parameters.  It is built in a temporary
directory beside it and renamed into place, so a killed build leaves no half dataset.  A
``manifest.json`` records every file's size and SHA-256; a cached dataset is checked against
it before use and rebuilt when anything differs, so a corrupt shard is never read as data.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.errors import PerfsuiteError

MANIFEST = "manifest.json"
LAYOUT_VERSION = 1
FILES_PER_DIR = 1000


class DatasetError(PerfsuiteError):
    """The dataset cannot be built or read (the message names the directory)."""


@dataclass(frozen=True)
class DatasetSpec:
    """What the dataset holds; its key names the cache folder."""

    images: int
    height: int
    width: int
    shards: int
    quality: int = 90
    classes: int = 100
    seed: int = 20261123

    @property
    def key(self) -> str:
        """A folder name that changes whenever a parameter does."""
        text = json.dumps({**asdict(self), "layout": LAYOUT_VERSION}, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return f"jpeg-{self.images}x{self.height}x{self.width}-{self.shards}shards-{digest}"

    def estimated_bytes(self) -> int:
        """Rough size of both layouts (JPEG at this quality: ~0.5 byte per pixel, plus slack)."""
        return int(2 * self.images * self.height * self.width * 3 * 0.25) + (16 << 20)


@dataclass(frozen=True)
class Dataset:
    """A built dataset: where its two layouts are."""

    spec: DatasetSpec
    root: Path
    built: bool  # built in this call (False: reused from the cache)

    @property
    def shards(self) -> list[Path]:
        """The TFRecord shards, in order."""
        return sorted((self.root / "tfrecord").glob("shard-*.tfrecord"))

    @property
    def files(self) -> list[Path]:
        """The per-image JPEG files, in order."""
        return sorted((self.root / "files").glob("*/img-*.jpg"))

    def bytes_on_disk(self, layout: str) -> int:
        """Total bytes of one layout (``tfrecord`` or ``files``)."""
        paths = self.shards if layout == "tfrecord" else self.files
        return sum(p.stat().st_size for p in paths)


def default_cache_dir() -> Path:
    """``$PERFSUITE_DATA_DIR``, else ``$XDG_CACHE_HOME/perfsuite/datasets``."""
    if os.environ.get("PERFSUITE_DATA_DIR"):
        return Path(os.environ["PERFSUITE_DATA_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfsuite" / "datasets"


def synthetic_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """An RGB uint8 image with gradients, shapes, a texture and noise."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.empty((height, width, 3), np.float32)
    for c in range(3):
        fx, fy, phase = rng.uniform(0.5, 6.0), rng.uniform(0.5, 6.0), rng.uniform(0, 6.3)
        image[..., c] = 127 + 60 * np.sin(fx * x / width * 6.3 + phase) * np.cos(
            fy * y / height * 6.3
        )
    for _ in range(int(rng.integers(2, 6))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        r = rng.uniform(0.05, 0.3) * min(height, width)
        mask = (y - cy) ** 2 + (x - cx) ** 2 < r * r
        image[mask] = rng.uniform(0, 255, 3)
    image += rng.normal(0, 12, image.shape).astype(np.float32)
    out: np.ndarray = np.clip(image, 0, 255).astype(np.uint8)
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(root: Path, spec: DatasetSpec) -> str | None:
    """Why a cached dataset cannot be used (missing, changed or corrupt file), or None."""
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return f"no readable manifest ({exc})"
    if manifest.get("spec") != asdict(spec) or manifest.get("layout") != LAYOUT_VERSION:
        return "manifest describes another dataset"
    files = manifest.get("files", {})
    if len(files) != spec.shards + spec.images:
        return "manifest lists the wrong number of files"
    for rel, facts in files.items():
        path = root / rel
        try:
            if path.stat().st_size != facts["bytes"]:
                return f"{rel}: size changed"
        except OSError:
            return f"{rel}: missing"
    # Sizes are cheap; shards are also hashed (they hold most of the bytes read as data).
    for rel, facts in files.items():
        if rel.startswith("tfrecord/") and _sha256(root / rel) != facts["sha256"]:
            return f"{rel}: contents changed (SHA-256 differs)"
    return None


def _check_space(directory: Path, spec: DatasetSpec) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    need = spec.estimated_bytes()
    if free < need:
        raise DatasetError(
            f"{directory}: not enough space for the input-pipeline dataset: about "
            f"{need / 2**20:.0f} MiB needed, {free / 2**20:.0f} MiB free (set "
            "--perf-data-dir or PERFSUITE_DATA_DIR to a larger disk)"
        )


def _write(tmp: Path, spec: DatasetSpec, progress: bool) -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from tqdm import tqdm

    rng = np.random.default_rng(spec.seed)
    (tmp / "tfrecord").mkdir()
    writers = [
        tf.io.TFRecordWriter(str(tmp / "tfrecord" / f"shard-{i:05d}-of-{spec.shards:05d}.tfrecord"))
        for i in range(spec.shards)
    ]
    labels = rng.integers(0, spec.classes, spec.images)
    try:
        for i in tqdm(
            range(spec.images),
            desc=f"perfsuite: building {spec.images} JPEG images",
            unit="img",
            disable=None if progress else True,  # None: only on a terminal
            leave=False,
        ):
            jpeg = tf.io.encode_jpeg(
                synthetic_image(rng, spec.height, spec.width), quality=spec.quality
            ).numpy()
            folder = tmp / "files" / f"{i // FILES_PER_DIR:05d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"img-{i:06d}.jpg").write_bytes(jpeg)
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                        "label": tf.train.Feature(
                            int64_list=tf.train.Int64List(value=[int(labels[i])])
                        ),
                    }
                )
            )
            writers[i % spec.shards].write(example.SerializeToString())
    finally:
        for w in writers:
            w.close()
    files = {}
    for path in sorted(tmp.rglob("*")):
        if path.is_file():
            rel = str(path.relative_to(tmp))
            files[rel] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    return {"spec": asdict(spec), "layout": LAYOUT_VERSION, "files": files}


def build(spec: DatasetSpec, cache_dir: Path | None = None, progress: bool = False) -> Dataset:
    """The dataset for ``spec``: reused from the cache when it checks out, else (re)built."""
    cache_dir = cache_dir or default_cache_dir()
    root = cache_dir / spec.key
    if root.is_dir():
        problem = _verify(root, spec)
        if problem is None:
            return Dataset(spec, root, built=False)
        print(f"perfsuite: cached dataset {root} is unusable ({problem}); rebuilding")
        shutil.rmtree(root, ignore_errors=True)
    _check_space(cache_dir, spec)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.key}.", dir=cache_dir))
    try:
        manifest = _write(tmp, spec, progress)
        (tmp / MANIFEST).write_text(json.dumps(manifest))
        try:
            os.replace(tmp, root)
        except OSError:  # another process built it first
            if _verify(root, spec) is not None:
                raise
    except OSError as exc:
        raise DatasetError(
            f"{cache_dir}: cannot build the input-pipeline dataset: {exc.strerror or exc}"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
    return Dataset(spec, root, built=True)
