"""The programs simulated containers run (see :mod:`.base`).

Importing the package registers every program module, so that whoever runs containers (the
kubelet) finds them whichever controllers the world has: a Job created by a real
system-upgrade-controller (``harvester-sim serve --without suc``) runs the same programs as
one created by the simulated one.
"""

from . import (  # noqa: F401 - registration on import
    cluster_net,
    daemons,
    harvester_server,
    kubectl,
    nginx_iso,
    podfs,
    rke2_upgrade,
    toolkit,
    upgrade_repo,
)
