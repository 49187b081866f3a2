"""The fixture package of the bisections over releases, and its wheels.

``tests/test_ab_processes.py`` and CI's ``.ci/bisect_releases.py`` each build a row of
releases of ``perfsuite-bisect-fixture`` as pure-Python wheels, written by hand (no build
backend, no network), and let ``perfsuite bisect`` install them from a local folder.  Each
release's ``bisect_fixture.work()`` is what :data:`CHECK` measures.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

DIST = "perfsuite-bisect-fixture"
MODULE = "bisect_fixture"

# The check each side of a bisection step runs: one call of the installed release's work().
CHECK = f"""
import {MODULE}
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_fixture_work(perf):
    perf.measure(Workload(check="fixture_work", params={{}}, metric="rate", unit="call/s",
                          work=Work(1.0, "call"), run={MODULE}.work))
"""


def write_wheel(folder: Path, version: str, source: str) -> Path:
    """``folder/<DIST>-<version>-py3-none-any.whl``, whose ``MODULE/__init__.py`` is ``source``."""
    dist, module = DIST, MODULE
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
