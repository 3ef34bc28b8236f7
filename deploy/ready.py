"""Is this container ready for students? Exit 0 when it is warm (deploy/entrypoint.py's mark) and healthy.

The image's HEALTHCHECK and the Kubernetes startup probe run it; the readiness and liveness probes ask
/_stcore/health directly once the startup probe has passed.
"""

from __future__ import annotations

import sys

from entrypoint import READY_MARK, healthy, port  # this file's folder is on sys.path when run as a script


def main() -> int:
    if not READY_MARK.exists():
        print("not ready: warming up")
        return 1
    if not healthy(f"http://127.0.0.1:{port()}"):
        print("not ready: /_stcore/health does not answer 200")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
