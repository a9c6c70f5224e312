"""Fault ``cert_near_expiry``: the API server's serving certificate expires in ``days``."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from pathlib import Path

import yaml
from cryptography import x509

from harvester_sim import testing


def _served_not_after(url: str) -> dt.datetime:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=5) as sock, \
            ctx.wrap_socket(sock, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).not_valid_after_utc


def _scenario(tmp_path: Path, faults: list[dict[str, object]]) -> str:
    path = tmp_path / "cert.yaml"
    path.write_text(yaml.safe_dump({"name": "cert", "extends": "empty", "faults": faults}))
    return str(path)


def test_serving_certificate_is_valid_a_year_by_default(tmp_path: Path) -> None:
    with testing.running(_scenario(tmp_path, [])) as sim:
        left = _served_not_after(sim.url) - dt.datetime.now(dt.timezone.utc)
    assert left > dt.timedelta(days=360)


def test_cert_near_expiry_shortens_the_serving_certificate(tmp_path: Path) -> None:
    faults = [{"kind": "cert_near_expiry", "days": 2}]
    with testing.running(_scenario(tmp_path, faults)) as sim:
        left = _served_not_after(sim.url) - dt.datetime.now(dt.timezone.utc)
        fired = [f["kind"] for f in sim.world.faults.fired]
    assert dt.timedelta(days=1.9) < left < dt.timedelta(days=2.1)
    assert fired == ["cert_near_expiry"]
