"""One local Ray session for a test module: `ray.init(num_cpus=2)`, shut down afterwards.

Ray starts a handful of Python processes (its dashboard agent, runtime-env agent, monitors,
workers) and each imports `jsonschema`; with jupyter's extras installed, jsonschema imports the
optional IRI checker `rfc3987_syntax`, which builds an Earley parser at import: about 3 s of CPU
in every one of those processes. On a busy 2-core machine the raylet then gives up waiting for
its agents (a fixed timeout) and Ray does not start. The session therefore starts with that one
optional module hidden from Ray's processes (a stub that raises ImportError, first on their
PYTHONPATH); jsonschema then simply does not check the "iri" format, which Ray never uses.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def ray_session(num_cpus: int = 2) -> Iterator[Any]:
    import ray

    with tempfile.TemporaryDirectory(prefix="nbagent-ray-") as tmp:
        stub = Path(tmp) / "rfc3987_syntax"
        stub.mkdir()
        (stub / "__init__.py").write_text(
            'raise ImportError("hidden from Ray processes: slow to import, not needed")\n'
        )
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = tmp + (os.pathsep + before if before else "")
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            try:
                yield ray
            finally:
                ray.shutdown()
        finally:
            if before is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = before


def per_second_peak(times: list[float], window: float = 1.0) -> int:
    """The most requests the server saw in any `window` seconds."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] > window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best
