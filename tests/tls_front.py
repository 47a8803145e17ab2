"""A real TLS endpoint in front of a Temporal dev server: a test CA made with ``openssl``, and ``nginx`` (the
Debian package ``scripts/setup.sh`` installs) proxying gRPC to the dev server on two ports, one demanding a
client certificate (mTLS), one an API key (``authorization: Bearer <key>``, the header the SDK sends)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from durable_rollouts.trainer_client.local_services import free_port, port_open

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
API_KEY = "rollouts-test-key"
SERVER_NAME = "temporal.rollouts.test"


@dataclass(frozen=True)
class Certificates:
    """PEM files: the CA every certificate here is signed by, the server's (for ``SERVER_NAME``), a client's, and
    an unrelated CA (what a client configured with the wrong one trusts)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def _ca(folder: Path, name: str) -> None:
    _openssl(
        folder,
        *("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"),
        *("-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN={name}"),
        *("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"),
    )


def _signed(folder: Path, name: str, subject: str, extensions: str) -> None:
    _openssl(
        folder,
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subject,
    )
    (folder / f"{name}.ext").write_text(extensions)
    _openssl(
        folder,
        *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2"),
        *("-out", f"{name}.pem", "-extfile", f"{name}.ext"),
    )


def make_certificates(folder: Path, server_alt_name: str = f"DNS:{SERVER_NAME}") -> Certificates:
    """The test CA, an unrelated one, a client certificate and the server's for ``server_alt_name`` (``DNS:<name>``
    or ``IP:<address>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    _ca(folder, "ca")
    _ca(folder, "other-ca")
    _signed(
        folder,
        "server",
        f"/CN={SERVER_NAME}",
        f"subjectAltName={server_alt_name}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    )
    _signed(folder, "client", "/CN=rollouts-trainer", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n")
    return Certificates(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
        other_ca=folder / "other-ca.pem",
    )


@dataclass(frozen=True)
class TlsFront:
    """The two TLS addresses in front of the dev server."""

    mtls_address: str
    api_key_address: str


def _preamble(folder: Path) -> str:
    """An nginx config's head up to inside its ``http`` block: root, one worker, pid, logs and every temp path
    in ``folder`` (made here), so a test's nginx writes nothing outside it."""
    temp = {name: folder / name for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir(exist_ok=True)
    return f"""
user root;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp["client_body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};"""


def _config(folder: Path, backend: str, certs: Certificates, mtls_port: int, key_port: int) -> str:
    common = f"""
        ssl_certificate {certs.server_cert};
        ssl_certificate_key {certs.server_key};
        grpc_read_timeout 300s;
        grpc_send_timeout 300s;
        client_max_body_size 0;"""
    return f"""{_preamble(folder)}
    server {{
        listen 127.0.0.1:{mtls_port} ssl http2;{common}
        ssl_client_certificate {certs.ca};
        ssl_verify_client on;
        location / {{ grpc_pass grpc://{backend}; }}
    }}
    server {{
        listen 127.0.0.1:{key_port} ssl http2;{common}
        location / {{
            if ($http_authorization != "Bearer {API_KEY}") {{ return 401; }}
            grpc_pass grpc://{backend};
        }}
    }}
}}
"""


def _nginx(folder: Path, config: str, ports: tuple[int, ...]) -> subprocess.Popen:
    """nginx on ``config`` in ``folder``, once it listens on every port."""
    assert NGINX is not None, "nginx is missing: scripts/setup.sh installs the Debian package nginx-light"
    path = folder / "nginx.conf"
    path.write_text(config)
    process = subprocess.Popen(
        [NGINX, "-p", str(folder), "-c", str(path), "-e", str(folder / "error.log"), "-g", "daemon off;"]
    )
    deadline = time.monotonic() + 20
    while not all(port_open("127.0.0.1", port) for port in ports):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"nginx did not listen within 20 s: {(folder / 'error.log').read_text()}")
        time.sleep(0.1)
    return process


@contextmanager
def docker_tls_front(certs: Certificates, folder: Path, socket: str = "/var/run/docker.sock") -> Iterator[str]:
    """nginx in front of the Docker engine's unix socket, demanding a client certificate (what ``dockerd
    --tlsverify`` does): its ``host:port`` until the block ends. Responses are not buffered, so an exec's stream
    reaches the client as the engine writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = f"""{_preamble(folder)}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {certs.server_cert};
        ssl_certificate_key {certs.server_key};
        ssl_client_certificate {certs.ca};
        ssl_verify_client on;
        client_max_body_size 0;
        location / {{
            proxy_pass http://unix:{socket}:;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""
    process = _nginx(folder, config, (port,))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


@contextmanager
def tls_front(backend: str, certs: Certificates, folder: Path) -> Iterator[TlsFront]:
    """nginx in front of ``backend`` (a dev server's host:port) until the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    mtls_port, key_port = free_port(), free_port()
    process = _nginx(folder, _config(folder, backend, certs, mtls_port, key_port), (mtls_port, key_port))
    try:
        yield TlsFront(f"127.0.0.1:{mtls_port}", f"127.0.0.1:{key_port}")
    finally:
        process.terminate()
        process.wait(timeout=20)
