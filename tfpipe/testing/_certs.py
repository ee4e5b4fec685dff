"""The throwaway CA and server certificate that let the LocalGCS proxy terminate TLS for the
Google storage hosts (TensorFlow is pointed at the CA with `CURL_CA_BUNDLE`)."""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING

from tfpipe.testing._gcs_proxy import GOOGLE_STORAGE_HOSTS

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes


def make_certs(directory: str) -> tuple[str, str, str]:
    """Writes a CA and a server cert for the Google storage hosts; returns their paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = _common_name("tfpipe LocalGCS test CA")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    usage = {
        "content_commitment": False,
        "key_encipherment": False,
        "data_encipherment": False,
        "key_agreement": False,
        "encipher_only": False,
        "decipher_only": False,
    }
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), start, end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **usage), critical=True
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        _builder(_common_name(GOOGLE_STORAGE_HOSTS[0]), ca_name, key.public_key(), start, end)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_STORAGE_HOSTS]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    contents = (
        ca.public_bytes(pem),
        cert.public_bytes(pem),
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    paths = tuple(os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key"))
    for path, content in zip(paths, contents, strict=True):
        with open(path, "wb") as f:
            f.write(content)
    return paths  # type: ignore[return-value]


def _common_name(name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: CertificatePublicKeyTypes,
    start: datetime.datetime,
    end: datetime.datetime,
) -> x509.CertificateBuilder:
    """A certificate builder with what both certificates share: names, key, serial, validity."""
    from cryptography import x509

    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )
