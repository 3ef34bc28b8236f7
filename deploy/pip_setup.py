"""Lend this machine's pip set-up to an image build without leaving any of it in the image.

`python3 deploy/pip_setup.py STAGE` reads pip's effective configuration (`pip config list`: its files and PIP_*
variables), writes STAGE/pip.conf with every local path in it (wheel folders, local indexes, the CA bundle,
constraint files) moved under /mnt/pip/, creates their mount points in STAGE, and prints one `HOST:CONTAINER`
volume a line, STAGE:/mnt first. deploy/image.sh passes them to `podman build -v ...:ro` and points
PIP_CONFIG_FILE at /mnt/pip.conf.

Why a stage: podman creates a missing mount point inside the image being built, and commits it (an empty
/etc/pip.conf, or the folder of a local wheel house, would tell how this machine is set up). /mnt exists in every
Debian image, and with STAGE mounted on it, the mount points live in STAGE, outside the image. Prints nothing when
pip has no configuration here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PATH_KEYS = {"cert", "client-cert", "find-links", "index-url", "extra-index-url", "constraint", "requirement"}


def effective_config() -> dict[str, str]:
    """pip's merged configuration: key (without its section) -> value."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    files, env = {}, {}
    for line in out.splitlines():
        m = re.match(r"^([^.]*)\.([\w-]+)='(.*)'$", line)  # global.find-links='/srv/wheels', :env:.cert='...'
        if m:
            (env if m.group(1) == ":env:" else files)[m.group(2).replace("_", "-")] = m.group(3)
    return files | env  # PIP_* variables win over the files, as in pip


def lend(stage: Path) -> list[tuple[str, str]]:
    """Write stage/pip.conf and the mount points; the (host, container) volumes, stage -> /mnt first."""
    config = effective_config()
    if not config:
        return []
    mounts: dict[str, str] = {}  # host path -> path inside the build

    def moved(host: Path) -> str:
        if str(host) not in mounts:
            inside = f"pip/{len(mounts)}-{host.name}"
            (stage / inside).parent.mkdir(parents=True, exist_ok=True)
            if host.is_dir():
                (stage / inside).mkdir()
            else:
                (stage / inside).touch()
            mounts[str(host)] = inside
        return "/mnt/" + mounts[str(host)]

    lines = ["[global]"]
    for key, value in sorted(config.items()):
        if key in PATH_KEYS:
            words = []
            for word in value.split():
                url = word.startswith("file://")
                path = Path(word.removeprefix("file://"))
                if not path.is_absolute() or not path.exists():
                    words.append(word)
                elif url and key.endswith("index-url"):
                    # A local index's pages link to the files beside it (../files/): lend its parent folder.
                    words.append(f"file://{moved(path.parent)}/{path.name}")
                else:
                    words.append(("file://" if url else "") + moved(path))
            value = " ".join(words)
        lines.append(f"{key} = {value}")
    (stage / "pip.conf").write_text("\n".join(lines) + "\n")
    return [(str(stage), "/mnt")] + [(host, "/mnt/" + inside) for host, inside in mounts.items()]


def main() -> None:
    stage = Path(sys.argv[1])
    for host, inside in lend(stage):
        print(f"{host}:{inside}")


if __name__ == "__main__":
    main()
