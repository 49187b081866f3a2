"""Pure-Python wheels of a small package, written by hand (no build backend, no network).

For the bisections over releases: ``tests/test_ab_processes.py`` and CI's
``.ci/bisect_releases.py`` each build a row of releases of one fixture package and let
``perfsuite bisect`` install them from a local folder.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def write_wheel(folder: Path, dist: str, module: str, version: str, source: str) -> Path:
    """``folder/<dist>-<version>-py3-none-any.whl``: ``module/__init__.py`` holds ``source``."""
    name = dist.replace("-", "_")
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: perfsuite-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for arc, text in files.items():
            data = text.encode()
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{arc},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path
