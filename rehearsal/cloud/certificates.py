"""A certificate authority made for one rehearsal, and the certificate its proxy shows for
``*.googleapis.com``.

Tasks trust this authority alone (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``,
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``, ``SSL_CERT_FILE``), so the Google clients inside them
verify TLS as they always do and still reach the local stand-ins; a connection to the real
Google would fail verification. The key never leaves the rehearsal's folder and is made
anew by every rehearsal.
"""

from __future__ import annotations

import dataclasses
import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# One label under googleapis.com: www., storage., oauth2., <region>-aiplatform.
HOSTS = ("*.googleapis.com", "googleapis.com")
# The CA certificate's file in the certificates' folder: what clients trust.
AUTHORITY_FILE = "ca.pem"
CA_NAME = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Pipeline rehearsal CA")])


@dataclasses.dataclass(frozen=True)
class Certificates:
    authority: str  # the CA certificate (PEM): what tasks trust
    certificate: str  # the proxy's certificate chain (PEM)
    key: str  # the proxy's private key (PEM)


def make_certificates(folder: str, hosts: tuple[str, ...] = HOSTS) -> Certificates:
    """A fresh CA and a server certificate for ``hosts`` signed by it, written to ``folder``."""
    os.makedirs(folder, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _authority_certificate(ca_key, now)
    leaf = _server_certificate(key, hosts, ca, ca_key, now)
    return _write_certificates(folder, ca, leaf, key)


def _valid_for_two_days(builder: x509.CertificateBuilder, now: datetime.datetime) -> x509.CertificateBuilder:
    """Valid from five minutes ago (clock skew between processes) for two days: one rehearsal's length."""
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=2)
    )


def _authority_certificate(ca_key: ec.EllipticCurvePrivateKey, now: datetime.datetime) -> x509.Certificate:
    """The self-signed CA certificate: it may sign server certificates and nothing below them."""
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(CA_NAME)
        .issuer_name(CA_NAME)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
    )
    return _valid_for_two_days(builder, now).sign(ca_key, hashes.SHA256())


def _server_certificate(
    key: ec.EllipticCurvePrivateKey,
    hosts: tuple[str, ...],
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
) -> x509.Certificate:
    """The proxy's certificate for ``hosts``, signed by the CA."""
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    return _valid_for_two_days(builder, now).sign(ca_key, hashes.SHA256())


def _write_certificates(
    folder: str, ca: x509.Certificate, leaf: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> Certificates:
    """PEM files: the CA, the proxy's chain (its certificate, then the CA's) and its key (owner only)."""
    pem = serialization.Encoding.PEM
    paths = Certificates(
        authority=os.path.join(folder, AUTHORITY_FILE),
        certificate=os.path.join(folder, "proxy.pem"),
        key=os.path.join(folder, "proxy-key.pem"),
    )
    _write(paths.authority, ca.public_bytes(pem))
    _write(paths.certificate, leaf.public_bytes(pem) + ca.public_bytes(pem))
    _write(
        paths.key,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        mode=0o600,
    )
    return paths


def _write(path: str, data: bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
