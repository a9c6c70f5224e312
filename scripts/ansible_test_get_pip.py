"""Offline stand-in for the pip bootstrap script ansible-test downloads.

ansible-test creates its sanity virtual environments without pip and then runs a
``get-pip`` script fetched from a host that is not a package registry (unreachable here).
``scripts/sanity.sh`` copies this file to ``~/.ansible/test/cache/get_pip_<version>.py``,
where ansible-test looks first. It does what get-pip does: put pip into the running
interpreter (from the bundled ``ensurepip`` wheel) and install the requested packages
(``pip==<version>`` and friends) from the package index.
"""

from __future__ import annotations

import subprocess
import sys

# Options understood by the real get-pip script but not by ``pip install``.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"],
                          stdout=subprocess.DEVNULL)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *args])


if __name__ == "__main__":
    main()
