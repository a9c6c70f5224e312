"""A throw-away certificate authority and serving certificate for the simulated API server.

Generated with ``cryptography`` at start-up (EC P-256: fast to generate and to handshake);
the serving certificate carries SANs ``127.0.0.1`` and ``localhost`` so clients verify it
against the CA written into the kubeconfig, exactly as with a real cluster.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..clock import Clock


@dataclass(frozen=True)
class ServingCerts:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def ssl_context(self) -> ssl.SSLContext:
        """A server-side context (HTTP/1.1 only: we do not speak HTTP/2)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        # load_cert_chain needs files; keep them only for the duration of the call
        with tempfile.TemporaryDirectory(prefix="harvester-sim-tls-") as d:
            cert = os.path.join(d, "tls.crt")
            key = os.path.join(d, "tls.key")
            with open(cert, "wb") as f:
                f.write(self.cert_pem + self.ca_pem)
            with open(key, "wb") as f:
                f.write(self.key_pem)
            os.chmod(key, 0o600)
            ctx.load_cert_chain(cert, key)
        return ctx


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def generate(hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
             serving_days: float = 365) -> ServingCerts:
    """CA (valid a year) and serving certificate valid ``serving_days`` from now (the
    ``cert_near_expiry`` fault makes that short)."""
    now = Clock.wall_now() - _dt.timedelta(minutes=5)
    later = now + _dt.timedelta(days=365)
    serving_until = now + _dt.timedelta(minutes=5, days=serving_days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("harvester-sim-ca"))
        .issuer_name(_name("harvester-sim-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(serving_until)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingCerts(
        ca_pem=ca_cert.public_bytes(pem),
        cert_pem=cert.public_bytes(pem),
        key_pem=key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()),
    )
