"""Start the workshop hub (`make hub`), and stop it with everything it started.

    python deploy/hub/workshop_hub.py [--ip 127.0.0.1] [--port 8000] [--learners FILE] [--threads 1] [--memory 2]
    python deploy/hub/workshop_hub.py --ip 0.0.0.0 --self-signed        # a room's network: https
    python deploy/hub/workshop_hub.py --update-copies [--state DIR]     # new notebooks to every learner

Run it with the hub's own interpreter (``build/hub/venv/bin/python``, made by `make hub`): the
learners' servers run that interpreter, so it must be one they can read (not a venv whose base
Python lives under /root). Before anything starts it checks, and says what to do otherwise: root
(each learner is a Unix user), jupyterhub and the idle culler, configurable-http-proxy, that the
learners can run the course, that the four ports are free, that the password is at least 10
characters and not a common one, and that an address other than loopback has TLS
(``--ssl-cert/--ssl-key``, or ``--self-signed``: a certificate made in the state folder, its
SHA-256 fingerprint printed for the learners to compare) unless ``--insecure`` says otherwise.
The state folder is 0700 (the database 0600). The password goes to the terminal only: with
stdout redirected to a log it is written to /dev/tty, or, without one, to STATE/password (0600).

Limits: with systemd and cgroup v2, one unit per learner (MemoryMax, CPUQuota: all of a learner's
kernels share them); otherwise a per-process RLIMIT_DATA, a private /dev/shm of the same size per
learner where the machine allows mount namespaces, and a file-size bound in any case. The banner
says which is in force (:func:`limits_in_force`).

Stopping (Ctrl-C, SIGTERM, or leaving the ``with Hub(...)`` block) stops JupyterHub, which stops
every learner's server and the proxy; whatever is still alive after that and was started by this
hub is killed: its descendants, and every process carrying its id (MHA_HUB_ID, which each
learner's server and kernel inherit). Another hub's learners, on the same machine and in the same
Unix group, are never touched. Learners' accounts and homes are kept (their work is in them);
the benchmark removes the accounts it created with :func:`remove_learner_accounts`.
"""
from __future__ import annotations

import argparse
import grp
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIG = HERE / "jupyterhub_config.py"
GROUP = "mha-learners"
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
DEFAULT_PROXY = ROOT / "build" / "hub-npm" / "node_modules" / ".bin" / "configurable-http-proxy"
DEFAULT_MEMORY_GIB = 2.0  # what one process of a learner may allocate: the Zero to JupyterHub values' limit
MIN_PASSWORD = 10
# refused as workshop passwords (and anything made of one character, or of digits only under 12)
COMMON_PASSWORDS = {"password", "password1", "password12", "password123", "passw0rd", "1234567890", "12345678910",
                    "0123456789", "qwertyuiop", "qwerty1234", "1q2w3e4r5t", "letmein123", "iloveyou12", "welcome123",
                    "changeme12", "changeme123", "workshop12", "workshop123", "jupyterhub", "jupyter123", "attention1",
                    "attention123", "transformer", "abcdefghij", "abc1234567", "admin12345", "administrator",
                    "trustno1234", "football12", "monkey1234", "dragon1234", "sunshine12", "princess12", "mhacourse1",
                    "mha-course", "mha-course1", "mhacourse123", "secret1234", "student123", "students12"}
LOOPBACK = {"127.0.0.1", "localhost", "::1"}

__all__ = ["Hub", "HubError", "check_ports", "check_password", "hub_url", "remove_learner_accounts", "learner_accounts",
           "hub_learners", "limits_in_force", "self_signed_certificate", "update_copies", "main"]


class HubError(RuntimeError):
    """The hub cannot start: one message that says why and what to do."""


def _who_listens(port: int) -> str:
    try:
        import psutil
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                proc = psutil.Process(conn.pid)
                return f" by pid {conn.pid} ({' '.join(proc.cmdline())[:80]})"
    except Exception:
        pass
    return ""


def check_ports(ip: str, port: int) -> None:
    """Raise HubError if the proxy's port, its API port (+1), the hub's port (+2) or the progress page's (+3) is taken."""
    for p, role in ((port, "the hub's public port"), (port + 1, "the proxy's API"), (port + 2, "the hub itself"),
                    (port + 3, "the progress page")):
        host = ip if p == port else "127.0.0.1"  # only the public port is on ip; the rest stay on loopback
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, p))
            except OSError:
                raise HubError(
                    f"port {p} ({role}) is already in use{_who_listens(p)}. Stop that process or choose "
                    f"other ports: make hub HUB_PORT={port + 10} (the hub uses HUB_PORT, +1, +2 and +3)") from None


def check_password(password: str, what: str = "the workshop password") -> None:
    """HubError unless ``password`` has 10+ characters and is not a common one.

    The rule for every password that opens this hub: the shared one, and each learner's own in
    the learners file (``what`` names which, e.g. "learners.txt:3: bob's own password").
    """
    shared = what == "the workshop password"
    if len(password) < MIN_PASSWORD:
        raise HubError(f"{what} has {len(password)} characters; give one of at least {MIN_PASSWORD}"
                       + (" (MHA_HUB_PASSWORD=...), or none and the hub makes one" if shared else ""))
    low = password.lower()
    if low in COMMON_PASSWORDS or len(set(low)) == 1 or (low.isdigit() and len(low) < 12):
        raise HubError(f"{what} is a common one (the first a stranger in the room would try); "
                       "choose another, e.g. three unrelated words")


def room_address(ip: str) -> str:
    """The address learners type: ``ip`` itself, or for 0.0.0.0 / :: this machine's address on its network.

    (A UDP socket's connect sends nothing; it only picks the interface a packet would leave by.)
    """
    if ip not in ("0.0.0.0", "::", ""):
        return ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere
            return s.getsockname()[0]
    except OSError:
        return socket.gethostname()


def hub_url(ip: str, port: int, tls: bool) -> str:
    """``http(s)://ip:port/``, an IPv6 address in brackets (``http://[::1]:8000/``)."""
    host = f"[{ip}]" if ":" in ip else ip
    return f"{'https' if tls else 'http'}://{host}:{port}/"


def _is_loopback(ip: str) -> bool:
    """True for ``localhost`` and for an address in 127.0.0.0/8 or ::1, in any spelling; a host name is not."""
    import ipaddress
    if ip.lower() in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False  # a host name (even "127.example.org") may resolve to any address: TLS is required


def _certificate_names(ip: str) -> list:
    """The names a certificate for a hub on ``ip`` must cover: this host, localhost, ``ip`` and the room's address."""
    import ipaddress

    from cryptography import x509
    names = [x509.DNSName(socket.gethostname()), x509.DNSName("localhost")]
    for address in sorted({ip, room_address(ip), "127.0.0.1"} - {"0.0.0.0", "::", ""}):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            names.append(x509.DNSName(address))
    return names


def _certificate_fits(cert_path: Path, names: list) -> bool:
    """True if the certificate at ``cert_path`` covers every one of ``names`` and is valid for a day more."""
    import datetime

    from cryptography import x509
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        covered = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    tomorrow = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    return set(names) <= covered and cert.not_valid_after_utc > tomorrow


def self_signed_certificate(folder: Path, ip: str) -> tuple:
    """(cert path, key path, SHA-256 fingerprint) of a self-signed certificate in ``folder``.

    For ``ip``, the room's address and this machine's host name, valid 30 days; the key is 0600.
    It is kept for the next run while it still fits; one that does not cover the address (the
    next workshop's room) or expires within a day is made anew, and the banner prints the new
    fingerprint.
    """
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_path, key_path = folder / "hub-cert.pem", folder / "hub-key.pem"
    names = _certificate_names(ip)
    if not (key_path.exists() and _certificate_fits(cert_path, names)):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                f"mha-course workshop hub on {socket.gethostname()}")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.SubjectAlternativeName(names), critical=False).sign(key, hashes.SHA256()))
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    digest = cert.fingerprint(hashes.SHA256()).hex().upper()
    return cert_path, key_path, ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def limits_in_force() -> tuple:
    """("systemd" or "per-process", private /dev/shm possible: bool, a sentence for the banner)."""
    systemd = (Path("/run/systemd/system").is_dir() and Path("/sys/fs/cgroup/cgroup.controllers").exists()
               and shutil.which("systemd-run") is not None)
    if systemd:
        try:
            import systemdspawner  # noqa: F401
        except ImportError:
            systemd = False
    if systemd:
        return "systemd", True, "per learner (systemd unit: MemoryMax and CPUQuota shared by all their kernels)"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=1k",
                            "tmpfs", "/dev/shm"], capture_output=True) if shutil.which("unshare") else None
    shm = probe is not None and probe.returncode == 0
    return "per-process", shm, ("per process (RLIMIT_DATA: each kernel of a learner has its own limit; no systemd "
                                "with cgroup v2 here); /dev/shm " + ("private to each learner, of that size"
                                                                     if shm else "shared, each file at most that size"))


def _missing(proxy: Path) -> list:
    problems = []
    for module in ("jupyterhub", "jupyterhub_idle_culler", "psutil", "mha_course"):
        try:
            __import__(module)
        except ImportError:
            problems.append(f"{module} is not installed in {sys.executable} (make hub installs the `hub` extra)")
    if not (Path(sys.executable).parent / "jupyterhub-singleuser").exists():
        problems.append(f"jupyterhub-singleuser is not next to {sys.executable} (make hub installs it)")
    if not (proxy.exists() or shutil.which(str(proxy))):
        problems.append(f"configurable-http-proxy is not at {proxy}: make hub installs it with npm "
                        "(npm install --prefix build/hub-npm, version in deploy/hub/package.json)")
    for tool in ("useradd", "userdel", "groupadd", "runuser"):
        if not shutil.which(tool, path=SBIN_PATH):
            problems.append(f"{tool} is missing (the hub makes a Unix user per learner)")
    return problems


def _learners_can_run() -> str | None:
    """None if an unprivileged user can import the course with this interpreter, else the error."""
    run = subprocess.run([shutil.which("runuser", path=SBIN_PATH) or "runuser", "-u", "nobody", "--", sys.executable, "-c", "import mha_course, jupyterhub"],
                         capture_output=True, text=True, cwd="/", timeout=120)
    if run.returncode == 0:
        return None
    return (f"learners cannot run the course with {sys.executable}: {run.stderr.strip().splitlines()[-1:]}. "
            "Use an interpreter and a checkout every user can read: make hub builds build/hub/venv from "
            "/usr/bin/python3 (HUB_PYTHON=...); keep the repository outside /root.")


def hub_learners(state) -> list:
    """The users this hub's database knows (the learners it served), by name."""
    import sqlite3
    db = Path(state) / "jupyterhub.sqlite"
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return sorted(name for (name,) in con.execute("SELECT name FROM users"))


def update_copies(state, names=None, log=print) -> int:
    """Run ``mha-course student --update ~/mha-course`` as each learner of the hub at ``state``; failures.

    A learner without a copy yet gets it at their first login; nothing they edited is touched.
    """
    failures = 0
    runuser = shutil.which("runuser", path=SBIN_PATH) or "runuser"
    notebooks = sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
    for name in names if names is not None else hub_learners(state):
        try:
            home = Path(pwd.getpwnam(name).pw_dir)
        except KeyError:
            continue
        if not (home / "mha-course" / "notebooks").is_dir():
            continue
        run = subprocess.run([runuser, "-u", name, "--", str(Path(sys.executable).parent / "mha-course"), "student",
                              "--update", str(home / "mha-course"), "--notebooks", *notebooks],
                             capture_output=True, text=True, cwd=home)
        lines = (run.stdout + run.stderr).strip().splitlines()
        log(f"{name}: {lines[-1] if lines else run.returncode}")
        failures += run.returncode != 0
    return failures


def learner_accounts(prefix: str = "") -> list:
    """Names of the Unix users in the learners' group (whose names start with ``prefix``)."""
    try:
        gid = grp.getgrnam(GROUP).gr_gid
    except KeyError:
        return []
    return sorted(u.pw_name for u in pwd.getpwall() if u.pw_gid == gid and u.pw_name.startswith(prefix))


def processes_of_hub(hub_id: str, roots=()) -> list:
    """The live processes this hub started: descendants of ``roots`` (pids) and those carrying MHA_HUB_ID=hub_id."""
    import psutil
    found = {}
    for pid in roots:
        try:
            root = psutil.Process(pid)
            for proc in [root] + root.children(recursive=True):
                found[proc.pid] = proc
        except psutil.NoSuchProcess:
            pass
    if hub_id:
        for proc in psutil.process_iter():
            try:
                if proc.pid not in found and proc.environ().get("MHA_HUB_ID") == hub_id:
                    found[proc.pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
    return [p for pid, p in sorted(found.items()) if pid != os.getpid()]


def remove_learner_accounts(names) -> None:
    """Kill the learners' processes, then delete their Unix accounts and homes (only members of GROUP)."""
    members = set(learner_accounts())
    names = [n for n in names if n in members]
    if not names:
        return
    import psutil
    uids = {pwd.getpwnam(n).pw_uid for n in names}
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)
    for name in names:
        subprocess.run([shutil.which("userdel", path=SBIN_PATH) or "userdel", "--remove", name],
                       capture_output=True, text=True)


# JupyterLab's settings for every learner (the learners' venv is this interpreter's): no news
# feed, no "a new version is out" check, no extension manager (the course's image uses the same file).
QUIET_LAB = HERE / "jupyterlab-overrides.json"


def quiet_jupyterlab(prefix=None) -> Path:
    """Write (merge) QUIET_LAB into ``<prefix>/share/jupyter/lab/settings/overrides.json``; return its path."""
    import json
    quiet = json.loads(QUIET_LAB.read_text(encoding="utf-8"))
    path = Path(prefix or sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        current = {}
    merged = {**current, **{k: {**current.get(k, {}), **v} for k, v in quiet.items()}}
    if merged != current:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return path


class Hub:
    """The workshop hub as a process group: ``with Hub(port=8000, password=...) as hub: ...``."""

    def __init__(self, *, ip="127.0.0.1", port=8000, password=None, learners=None, threads=1,
                 cull_timeout=3600, state=None, proxy=None, service_token=None, log=None, progress=True,
                 spawn_limit=0, memory_gib=DEFAULT_MEMORY_GIB, ssl_cert=None, ssl_key=None, self_signed=False,
                 insecure=False, admin=None, admin_password=None, lang=None):
        self.ip, self.port, self.threads, self.cull_timeout = ip, int(port), int(threads), int(cull_timeout)
        if lang not in (None, "en", "zh_CN"):
            raise HubError(f"--lang {lang!r}: the course has en and zh_CN; a learner's own line may say name::zh_CN")
        self.lang = lang
        self.memory_gib = memory_gib
        self.password = password or os.environ.get("MHA_HUB_PASSWORD") or secrets.token_urlsafe(12)
        self.learners = learners
        self.state = Path(state or ROOT / "build" / "hub" / "state").resolve()
        proxy = str(proxy or os.environ.get("MHA_HUB_PROXY") or DEFAULT_PROXY)
        self.proxy = Path(proxy).resolve() if "/" in proxy else Path(shutil.which(proxy) or proxy)
        self.service_token = service_token
        self.log_path = Path(log) if log else None
        self.progress = progress and self.log_path is not None  # else the hub's own log lines are the progress
        self.spawn_limit = spawn_limit
        self.ssl_cert, self.ssl_key, self.self_signed, self.insecure = ssl_cert, ssl_key, self_signed, insecure
        self.fingerprint = None
        self.admin, self.admin_password = admin, admin_password
        self.hub_id = secrets.token_hex(8)  # every process of this hub's learners carries it (MHA_HUB_ID)
        self.limits = ("per-process", False, "")
        self.proc = None
        self.roots = []
        self.url = hub_url(ip, self.port, tls=bool(ssl_cert or self_signed))

    # -- checks -----------------------------------------------------------------------------------
    def check(self) -> None:
        if os.geteuid() != 0:
            raise HubError("the hub makes a Unix user per learner and runs each learner's server as that "
                           "user (LocalProcessSpawner): run it as root, e.g. sudo make hub")
        problems = _missing(self.proxy)
        if problems:
            raise HubError("missing: " + "; ".join(problems))
        self.check_network()
        check_password(self.password)
        if self.admin and len(self.admin_password or "") < 32:
            raise HubError("an admin needs an admin password of at least 32 characters (MHA_HUB_ADMIN_PASSWORD)")
        if not 0.25 <= self.memory_gib <= 1024:
            raise HubError(f"--memory {self.memory_gib:g} GiB is not a memory limit for one process; give one "
                           "from 0.25 to 1024 GiB (default 2)")
        if self.learners and not Path(self.learners).is_file():
            raise HubError(f"the learners file {self.learners} does not exist (one name or name:password a line)")
        problem = _learners_can_run()
        if problem:
            raise HubError(problem)
        check_ports(self.ip, self.port)

    def check_network(self) -> None:
        """HubError for an address other than loopback without TLS (unless --insecure), or half a certificate."""
        if bool(self.ssl_cert) != bool(self.ssl_key):
            raise HubError("give both --ssl-cert and --ssl-key (the certificate and its private key), or neither")
        for path in (self.ssl_cert, self.ssl_key):
            if path and not Path(path).is_file():
                raise HubError(f"{path} does not exist; give the certificate and key files (PEM)")
        tls = bool(self.ssl_cert) or self.self_signed
        if not _is_loopback(self.ip) and not tls and not self.insecure:
            raise HubError(f"--ip {self.ip} puts the hub on a network, where passwords and notebooks would travel "
                           "in plain HTTP: give --ssl-cert FILE --ssl-key FILE, or --self-signed (a certificate "
                           "made here, its fingerprint printed), or say --insecure if the network is yours alone")

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        env.update(MHA_HUB_IP=self.ip, MHA_HUB_PORT=str(self.port), MHA_HUB_STATE=str(self.state),
                   MHA_HUB_PASSWORD=self.password, MHA_HUB_THREADS=str(self.threads),
                   MHA_HUB_CULL_TIMEOUT=str(self.cull_timeout), MHA_HUB_PROXY=str(self.proxy),
                   MHA_HUB_PROXY_TOKEN=secrets.token_hex(32), MHA_HUB_SPAWN_LIMIT=str(self.spawn_limit),
                   MHA_HUB_MEMORY_KIB=str(int(self.memory_gib * 1024 * 1024)), MHA_HUB_ID=self.hub_id,
                   MHA_HUB_LIMITS=self.limits[0], MHA_HUB_PRIVATE_SHM="1" if self.limits[1] else "0",
                   MHA_HUB_NOTEBOOKS=str(ROOT / "notebooks"))
        for key in ("MHA_HUB_LEARNERS", "MHA_HUB_SSL_CERT", "MHA_HUB_SSL_KEY", "MHA_HUB_ADMIN", "MHA_HUB_ADMIN_PASSWORD"):
            env.pop(key, None)
        if self.ssl_cert:
            env.update(MHA_HUB_SSL_CERT=str(Path(self.ssl_cert).resolve()), MHA_HUB_SSL_KEY=str(Path(self.ssl_key).resolve()))
        if self.admin:
            env.update(MHA_HUB_ADMIN=self.admin, MHA_HUB_ADMIN_PASSWORD=self.admin_password)
        if self.learners:
            env["MHA_HUB_LEARNERS"] = str(Path(self.learners).resolve())
        if self.lang:
            env["MHA_HUB_LANG"] = self.lang  # every learner's copy in this language, unless their line says another
        if self.service_token:
            env["MHA_HUB_SERVICE_TOKEN"] = self.service_token
        return env

    # -- start and stop ---------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> "Hub":
        self.check()
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.state, 0o700)  # the database names every learner, cookie id and token hash
        if self.self_signed and not self.ssl_cert:
            self.ssl_cert, self.ssl_key, self.fingerprint = self_signed_certificate(self.state, self.ip)
        self.limits = limits_in_force()
        quiet_jupyterlab()
        out = open(self.log_path, "ab") if self.log_path else None
        exe = Path(sys.executable).parent / "jupyterhub"
        self.proc = subprocess.Popen([str(exe), "-f", str(CONFIG)], cwd=self.state, env=self.env(),
                                     stdout=out, stderr=subprocess.STDOUT if out else None,
                                     start_new_session=True,  # its own process group, killed as one
                                     umask=0o077)  # the database, secrets, pid files: the hub's alone
        self.roots = [self.proc.pid]
        if out:
            out.close()
        try:
            self._wait_ready(timeout)
            db = self.state / "jupyterhub.sqlite"
            if db.exists():
                os.chmod(db, 0o600)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        from tqdm import tqdm
        start = time.monotonic()
        with tqdm(total=int(timeout), desc="starting the hub", unit="s", disable=not self.progress, mininterval=1,
                  leave=False, file=sys.stderr) as bar:
            while True:
                if self.proc.poll() is not None:
                    raise HubError(f"JupyterHub exited with code {self.proc.returncode} while starting"
                                   + self._log_tail())
                try:
                    import ssl
                    context = ssl._create_unverified_context() if self.url.startswith("https") else None
                    with urllib.request.urlopen(f"{self.url}hub/api", timeout=2, context=context) as r:
                        if r.status == 200:
                            return
                except (urllib.error.URLError, OSError):
                    pass
                elapsed = time.monotonic() - start
                if elapsed > timeout:
                    raise HubError(f"JupyterHub did not answer on {self.url} within {timeout:.0f} s" + self._log_tail())
                bar.n = min(int(elapsed), int(timeout))
                bar.refresh()
                time.sleep(0.3)

    def _log_tail(self) -> str:
        if self.log_path and self.log_path.exists():
            return ":\n" + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        return " (its log is above)"

    def stop(self, grace: float = 30) -> None:
        """Stop the hub (it stops the learners' servers and the proxy), then kill what it started and is left.

        What it started: the hub's process and its descendants (the proxy, the services, the
        learners' servers and their kernels), and any process carrying this hub's MHA_HUB_ID (a
        kernel or a terminal's job that left its parent). Nothing else, whoever owns it.
        """
        import psutil
        left = processes_of_hub(self.hub_id, self.roots) if self.proc is not None else []
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            left += processes_of_hub(self.hub_id)  # whatever left its parent since
        for proc in left:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(left, timeout=10)
        (self.state / "proxy.pid").unlink(missing_ok=True)

    def __enter__(self) -> "Hub":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def _stop_with_parent() -> None:
    """If whoever started us dies (make killed by a signal), stop too: SIGTERM to ourselves."""
    import threading
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _say_password(text: str, state: Path) -> str:
    """Show the banner line with the password on the terminal only; return what the log may carry instead."""
    if sys.stdout.isatty():
        return text
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(text + "\n")
        return "the workshop password: shown on the terminal (never in this log)"
    except OSError:
        path = state / "password"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text.rsplit(": ", 1)[-1] + "\n")
        return f"the workshop password: in {path} (0600; no terminal to show it on, and never in this log)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A JupyterHub for a workshop on this machine (make hub).")
    parser.add_argument("--ip", default=os.environ.get("MHA_HUB_IP", "127.0.0.1"),
                        help="address learners reach (default 127.0.0.1; 0.0.0.0 for a room's network, with TLS)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("MHA_HUB_PORT", "8000")),
                        help="the hub's port (default 8000; it also uses the next three)")
    parser.add_argument("--learners", help="a file of learners: one `name`, `name:password` or `name:password:zh_CN` "
                                           "(a Chinese copy for that learner) a line; without it anyone with the "
                                           "workshop password may log in")
    parser.add_argument("--lang", choices=("en", "zh_CN"), default=None,
                        help="the language of the learners' copies (default en; a learner's line may say otherwise)")
    parser.add_argument("--admin", default=os.environ.get("MHA_HUB_ADMIN"),
                        help="the instructor's login name: the admin page and the progress page "
                             "(password from MHA_HUB_ADMIN_PASSWORD, 32+ characters)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per learner (default 1)")
    parser.add_argument("--memory", type=float, default=DEFAULT_MEMORY_GIB, metavar="GIB",
                        help="memory limit in GiB (default 2): per learner with systemd, else per process of a "
                             "learner; past it numpy raises MemoryError in that learner's kernel")
    parser.add_argument("--cull-timeout", type=int, default=3600,
                        help="stop a server idle this many seconds (default 3600)")
    parser.add_argument("--state", default=None, help="folder for the hub's database and secrets "
                                                      "(default build/hub/state)")
    parser.add_argument("--proxy", default=None, help="configurable-http-proxy (default build/hub-npm's)")
    tls = parser.add_argument_group("TLS (required for any --ip other than loopback)")
    tls.add_argument("--ssl-cert", help="the certificate (PEM), e.g. from the institution or letsencrypt")
    tls.add_argument("--ssl-key", help="its private key (PEM)")
    tls.add_argument("--self-signed", action="store_true",
                     help="make a self-signed certificate in the state folder and print its fingerprint")
    tls.add_argument("--insecure", action="store_true", help="plain HTTP on a network: only on one that is yours alone")
    parser.add_argument("--update-copies", action="store_true",
                        help="do not start a hub: bring new and changed notebooks into every learner's copy "
                             "(of the hub whose --state this is; edited notebooks are never touched)")
    args = parser.parse_args(argv)
    state = Path(args.state or ROOT / "build" / "hub" / "state")
    if args.update_copies:
        if os.geteuid() != 0:
            print("make hub: --update-copies runs as each learner: run it as root", file=sys.stderr)
            return 2
        return 1 if update_copies(state) else 0
    given = os.environ.get("MHA_HUB_PASSWORD")
    hub = Hub(ip=args.ip, port=args.port, password=given, learners=args.learners, threads=args.threads,
              cull_timeout=args.cull_timeout, state=args.state, proxy=args.proxy, memory_gib=args.memory,
              ssl_cert=args.ssl_cert, ssl_key=args.ssl_key, self_signed=args.self_signed, insecure=args.insecure,
              admin=args.admin, admin_password=os.environ.get("MHA_HUB_ADMIN_PASSWORD"), lang=args.lang)

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    _stop_with_parent()
    try:
        hub.start()
    except HubError as err:
        print(f"make hub: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        hub.stop()
        return 130
    who = f"the learners in {args.learners}" if args.learners else "anyone"
    password = ("the workshop password: from MHA_HUB_PASSWORD" if given
                else _say_password(f"the workshop password: {hub.password}", hub.state))
    shown = hub_url(room_address(hub.ip), hub.port, tls=hub.url.startswith("https"))
    lines = [f"\nThe workshop hub is at {shown} ({who}; {password}).",
             "Each learner logs in with a name of their choice and gets ~/mha-course/notebooks/ on first login."]
    if hub.fingerprint:
        lines.append(f"Self-signed certificate {hub.ssl_cert}; learners should see the SHA-256 fingerprint\n  "
                     f"{hub.fingerprint}\n  in their browser's certificate details before they accept it.")
    elif not _is_loopback(hub.ip) and not hub.ssl_cert:
        lines.append("WARNING: --insecure: plain HTTP on a network; anyone on it can read the passwords.")
    lines += [f"Memory limit {args.memory:g} GiB {hub.limits[2]}; BLAS threads per learner: {args.threads}; "
              f"idle servers stop after {args.cull_timeout} s.",
              f"The class's progress (admins only{'' if args.admin else ': give --admin NAME'}): "
              f"{shown}services/progress/",
              "Ctrl-C stops the hub and every learner's server it started.\n"]
    print("\n".join(lines), flush=True)
    try:
        hub.proc.wait()
        print(f"make hub: JupyterHub exited with code {hub.proc.returncode}", file=sys.stderr)
        return hub.proc.returncode or 1
    except KeyboardInterrupt:
        print("\nstopping the hub and every learner's server ...", file=sys.stderr, flush=True)
        return 0
    finally:
        # a second Ctrl-C, or the SIGTERM of the parent watch when make dies of the first one,
        # must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        hub.stop()


if __name__ == "__main__":
    sys.exit(main())
