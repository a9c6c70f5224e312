"""Capture the protobuf request bodies a kubectl >= 1.35 sends, as decoder test data.

Runs each ``kubectl create ...`` below against an in-process simulator, records the body of
every ``application/vnd.kubernetes.protobuf`` request (the simulator's request reader is
wrapped), and writes ``simulator/tests/data/protobuf/kubectl-<name>.pb``. The expected JSON,
``kubectl-<name>.json``, is what the same kubectl prints for ``--dry-run=client -o json``
(null values dropped: the decoder omits what JSON would write as null); for the commands
without a client-side dry run (token, role, clusterrole, auth) it is the decoder's output,
to be reviewed by hand before committing.

    .venv/bin/python simulator/scripts/capture_kubectl_protobuf.py /path/to/kubectl
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harvester_sim import testing
from harvester_sim.api import protobuf
from harvester_sim.api import server as srv

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "protobuf"
NS = "pbns"
COMMANDS: list[tuple[str, list[str], bool]] = [  # name, args, has a client-side dry run
    ("namespace", ["create", "namespace", NS], True),
    ("configmap", ["create", "configmap", "c1", "-n", NS, "--from-literal=a=b",
                   "--from-literal=n=1"], True),
    ("secret", ["create", "secret", "generic", "s1", "-n", NS, "--from-literal=u=p",
                "--type=example.com/basic"], True),
    ("secret-docker", ["create", "secret", "docker-registry", "reg", "-n", NS,
                       "--docker-server=r.example.com", "--docker-username=u",
                       "--docker-password=p"], True),
    ("deployment", ["create", "deployment", "d1", "-n", NS, "--image=nginx:1.25",
                    "--replicas=2", "--port=80"], True),
    ("serviceaccount", ["create", "serviceaccount", "sa1", "-n", NS], True),
    ("token", ["create", "token", "sa1", "-n", NS, "--duration=20m", "--audience=a1"], False),
    ("service", ["create", "service", "clusterip", "svc1", "-n", NS, "--tcp=80:8080"], True),
    ("job", ["create", "job", "j1", "-n", NS, "--image=busybox", "--", "echo", "hi"], True),
    ("cronjob", ["create", "cronjob", "cj1", "-n", NS, "--image=busybox",
                 "--schedule=*/5 * * * *"], True),
    ("role", ["create", "role", "r1", "-n", NS, "--verb=get,list", "--resource=pods"], False),
    ("rolebinding", ["create", "rolebinding", "rb1", "-n", NS, "--role=r1",
                     "--serviceaccount=pbns:sa1"], True),
    ("clusterrole", ["create", "clusterrole", "cr1", "--verb=get", "--resource=nodes"], False),
    ("clusterrolebinding", ["create", "clusterrolebinding", "crb1", "--clusterrole=cr1",
                            "--user=bob"], True),
    ("pdb", ["create", "pdb", "pdb1", "-n", NS, "--selector=app=d1", "--min-available=1"],
     True),
    ("selfsubjectaccessreview", ["auth", "can-i", "get", "pods", "-n", NS], False),
    ("selfsubjectreview", ["auth", "whoami"], False),
]


def _drop_nulls(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _drop_nulls(v) for k, v in o.items() if v is not None}
    if isinstance(o, list):
        return [_drop_nulls(v) for v in o]
    return o


def main() -> None:
    kubectl = sys.argv[1] if len(sys.argv) > 1 else "kubectl"
    bodies: list[bytes] = []
    orig = srv._Handler._read_body

    def recording(self: Any) -> bytes:
        body = orig(self)
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype == protobuf.MEDIA_TYPE:
            bodies.append(body)
        return body

    srv._Handler._read_body = recording  # type: ignore[method-assign]
    OUT.mkdir(parents=True, exist_ok=True)
    with testing.running("empty:1", speed=10) as sim:
        env = {**os.environ, **sim.env}
        for name, args, dry in COMMANDS:
            before = len(bodies)
            proc = subprocess.run([kubectl, *args], env=env, capture_output=True, text=True,
                                  timeout=60)
            if proc.returncode != 0 or len(bodies) != before + 1:
                raise SystemExit(f"{name}: rc={proc.returncode} bodies={len(bodies) - before}"
                                 f"\n{proc.stderr}")
            body = bodies[-1]
            (OUT / f"kubectl-{name}.pb").write_bytes(body)
            if dry:
                cut = args.index("--") if "--" in args else len(args)
                dargs = args[:cut] + ["--dry-run=client", "-o", "json"] + args[cut:]
                out = subprocess.run([kubectl, *dargs], env=env, capture_output=True,
                                     text=True, timeout=60, check=True).stdout
                expected = _drop_nulls(json.loads(out))
            else:
                expected = protobuf.decode_object(body)
            (OUT / f"kubectl-{name}.json").write_text(
                json.dumps(expected, indent=1, sort_keys=True) + "\n")
            print(name, len(body))


if __name__ == "__main__":
    main()
