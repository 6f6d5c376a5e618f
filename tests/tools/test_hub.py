"""The workshop hub (`make hub`) and its benchmark, for real: root, Unix users, JupyterHub, the proxy.

- a port that is taken is refused before anything starts, naming the port and the fix;
- `make hub`'s launcher (one live hub for the module, two learners with a kernel each): a learner
  logs in with the workshop password (a wrong one is refused), gets a fresh student copy in a
  private home (0700, owned by the learner: another learner cannot read it), with the solutions
  turned into stubs, BLAS at one thread and the limit in force (the banner says which: per
  process, with a private /dev/shm of that size and a file-size bound; or systemd's per learner);
  the state folder is 0700 and the database 0600; JupyterLab shows no news and no update check;
  reserved and system names are refused at login with a message;
- end to end, the class's progress: one learner's checker passes, another's names a mistake; the
  admin's page (a hub service) shows both, then the fix; a learner gets 403 there;
- ``--update-copies`` runs ``student --update`` as each learner, keeping an edited notebook;
- a second hub (its generated password in a 0600 file, never in its log; one learner; stopped)
  and benchmarks/bench_hub.py with 2 learners beside the live hub: the first hub's kernels are
  the same processes afterwards and still answer; the benchmark leaves no account or process;
- a network address without TLS is refused (so are half a certificate and weak passwords), and
  --self-signed serves a certificate whose printed fingerprint is the one the socket presents;
- stopping the launcher leaves no process of its own behind.

They need root, the hub's interpreter (build/hub/venv, made by `make hub`) and
configurable-http-proxy (build/hub-npm); without them they skip with the reason, unless
MHA_COURSE_REQUIRE_HUB=1 (CI's hub step), which makes that a failure. The Unix accounts the
tests create (group mha-learners, mhatest-<this pid>-...) are removed, and only those: every
process a test stops is one it started (its own launcher's process group, or its accounts').

    make hub-install && python -m pytest tests/tools/test_hub.py -p no:nbval -q
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "hub"))
import workshop_hub  # noqa: E402  (stdlib only at import time)

HUB_VENV = Path(os.environ.get("MHA_COURSE_HUB_VENV", ROOT / "build" / "hub" / "venv"))
HUB_PY = HUB_VENV / "bin" / "python"
PROXY = workshop_hub.DEFAULT_PROXY
REQUIRED = os.environ.get("MHA_COURSE_REQUIRE_HUB") == "1"

pytestmark = pytest.mark.hub


def _hub_missing() -> str | None:
    if os.geteuid() != 0:
        return "the hub makes Unix users and must run as root"
    if not HUB_PY.exists():
        return f"the hub's interpreter {HUB_PY} is missing (make hub-install builds it)"
    if subprocess.run([str(HUB_PY), "-c", "import jupyterhub, jupyterhub_idle_culler, psutil"],
                      capture_output=True).returncode:
        return f"jupyterhub / jupyterhub-idle-culler / psutil are not installed in {HUB_VENV} (make hub-install)"
    if not PROXY.exists():
        return f"configurable-http-proxy is not at {PROXY} (make hub-install installs it with npm)"
    return None


@pytest.fixture(scope="module")
def hub_ready():
    reason = _hub_missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"MHA_COURSE_REQUIRE_HUB=1 but {reason}")
        pytest.skip(reason)


def test_a_taken_port_is_refused_with_the_fix():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(workshop_hub.HubError, match=rf"port {port} .*already in use.*HUB_PORT="):
            workshop_hub.check_ports("127.0.0.1", port)
        with pytest.raises(workshop_hub.HubError, match=rf"port {port} \(the proxy's API\)"):
            workshop_hub.check_ports("127.0.0.1", port - 1)


def test_the_ports_of_an_ipv6_loopback_hub_are_checked_on_ipv6():
    """``--ip ::1`` is loopback (no TLS needed): its free ports pass, a taken one is named."""
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    with probe:
        probe.listen()
        taken = probe.getsockname()[1]
        with pytest.raises(workshop_hub.HubError, match=rf"port {taken} \(the hub's public port\)"):
            workshop_hub.check_ports("::1", taken)
    workshop_hub.check_ports("::1", _free_block(9600))


@pytest.mark.parametrize("password", ["short", "123456789", "password123", "1234567890", "aaaaaaaaaaaaaa",
                                      "Workshop123", "12345678901"])
def test_weak_workshop_passwords_are_refused(password):
    with pytest.raises(workshop_hub.HubError, match="password"):
        workshop_hub.check_password(password)


@pytest.mark.parametrize("password", ["attention-is-all", "correct horse battery", "123456789012345"])
def test_good_workshop_passwords_pass(password):
    workshop_hub.check_password(password)


@pytest.mark.parametrize("ip", ["0.0.0.0", "192.168.1.20", "::", "127.example.org", "my-laptop.local"])
def test_a_network_address_without_tls_is_refused(ip, tmp_path):
    with pytest.raises(workshop_hub.HubError, match=r"plain HTTP.*--ssl-cert FILE --ssl-key FILE.*--self-signed.*--insecure"):
        workshop_hub.Hub(ip=ip, state=tmp_path).check_network()
    workshop_hub.Hub(ip=ip, state=tmp_path, insecure=True).check_network()  # said explicitly
    workshop_hub.Hub(ip=ip, state=tmp_path, self_signed=True).check_network()
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    with pytest.raises(workshop_hub.HubError, match="both --ssl-cert and --ssl-key"):
        workshop_hub.Hub(ip=ip, state=tmp_path, ssl_cert=cert).check_network()
    with pytest.raises(workshop_hub.HubError, match="does not exist"):
        workshop_hub.Hub(ip=ip, state=tmp_path, ssl_cert=cert, ssl_key=key).check_network()
    cert.write_text("x")
    key.write_text("x")
    workshop_hub.Hub(ip=ip, state=tmp_path, ssl_cert=cert, ssl_key=key).check_network()


def test_the_banner_names_an_address_learners_can_type():
    assert workshop_hub.room_address("127.0.0.1") == "127.0.0.1"
    assert workshop_hub.room_address("10.1.2.3") == "10.1.2.3"
    assert workshop_hub.room_address("0.0.0.0") not in ("0.0.0.0", "")
    assert workshop_hub.hub_url("10.1.2.3", 8000, tls=True) == "https://10.1.2.3:8000/"
    assert workshop_hub.hub_url("::1", 8000, tls=False) == "http://[::1]:8000/"  # not http://::1:8000/
    assert workshop_hub.Hub(ip="::1", port=8010).url == "http://[::1]:8010/"


@pytest.mark.parametrize("ip", ["127.0.0.1", "127.0.1.1", "127.9.8.7", "localhost", "LocalHost", "::1",
                                "0:0:0:0:0:0:0:1"])
def test_loopback_needs_no_tls(ip, tmp_path):
    workshop_hub.Hub(ip=ip, state=tmp_path).check_network()


def _certificate(path):
    from cryptography import x509
    return x509.load_pem_x509_certificate(path.read_bytes())


def _expired_certificate(cert_path, key_path):
    """A self-signed certificate for 127.0.0.1 that expired yesterday, as a state folder kept from long ago holds."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old")])
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.DNSName(n) for n in (socket.gethostname(), "localhost")]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=40))
            .not_valid_after(now - datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False).sign(key, hashes.SHA256()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert.fingerprint(hashes.SHA256()).hex().upper()


def test_a_kept_self_signed_certificate_is_made_anew_when_it_no_longer_fits(tmp_path):
    """Kept for the next run on the same address; another room's address, or an expired one, gets a new one."""
    import datetime
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509", reason="cryptography comes with jupyterhub")
    cert, key, first = workshop_hub.self_signed_certificate(tmp_path, "127.0.0.1")
    assert key.stat().st_mode & 0o777 == 0o600
    assert workshop_hub.self_signed_certificate(tmp_path, "127.0.0.1")[2] == first  # kept: the same fingerprint
    cert, key, other_room = workshop_hub.self_signed_certificate(tmp_path, "10.20.30.40")
    assert other_room != first
    covered = _certificate(cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("10.20.30.40") in covered.get_values_for_type(x509.IPAddress)
    old = _expired_certificate(cert, key)
    cert, key, renewed = workshop_hub.self_signed_certificate(tmp_path, "127.0.0.1")
    assert renewed.replace(":", "") != old
    left = _certificate(cert).not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    assert left > datetime.timedelta(days=29)


def test_jupyterlab_is_quieted_by_merging_overrides(tmp_path):
    settings = tmp_path / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True)
    (settings / "overrides.json").write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "x"},
                                                         "@jupyterlab/apputils-extension:notification": {"a": 1}}))
    path = workshop_hub.quiet_jupyterlab(tmp_path)
    got = json.loads(path.read_text())
    assert got["@jupyterlab/apputils-extension:themes"] == {"theme": "x"}  # someone else's setting stays
    assert got["@jupyterlab/apputils-extension:notification"] == {"a": 1, "fetchNews": "false", "checkForUpdates": False}


def test_a_hub_finds_only_the_processes_carrying_its_own_id():
    """What a hub stops: its descendants and its id's carriers; a process with another hub's id is not among them."""
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    mine = subprocess.Popen(sleep, env=dict(os.environ, MHA_HUB_ID="hub-a"), start_new_session=True)
    other = subprocess.Popen(sleep, env=dict(os.environ, MHA_HUB_ID="hub-b"), start_new_session=True)
    plain = subprocess.Popen(sleep, start_new_session=True)
    try:
        _wait_for(lambda: all(Path(f"/proc/{p.pid}/environ").read_bytes() for p in (mine, other)))
        found = {p.pid for p in workshop_hub.processes_of_hub("hub-a")}
        assert mine.pid in found and other.pid not in found and plain.pid not in found
        assert plain.pid in {p.pid for p in workshop_hub.processes_of_hub("", roots=[plain.pid])}
        assert not workshop_hub.processes_of_hub("hub-none")
    finally:
        for p in (mine, other, plain):  # only the three this test started, by their own pids
            p.kill()
            p.wait()


def test_the_hubs_learners_come_from_its_own_database(tmp_path):
    import sqlite3
    with sqlite3.connect(tmp_path / "jupyterhub.sqlite") as con:
        con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        con.executemany("INSERT INTO users (name) VALUES (?)", [("bob",), ("ada",)])
    assert workshop_hub.hub_learners(tmp_path) == ["ada", "bob"]
    assert workshop_hub.hub_learners(tmp_path / "none") == []


SPLIT = """
import json, pwd, sys
from pathlib import Path
homes = {n: Path(sys.argv[1]) / n for n in ("ada", "bob", "teacher")}
def getpwnam(name):
    if name not in homes:
        raise KeyError(name)
    return pwd.struct_passwd((name, "x", 2000, 2000, "", str(homes[name]), "/bin/sh"))
pwd.getpwnam = getpwnam
import progress_service
found, absent = progress_service.learner_folders(["ada", "bob", "cy", "teacher"])
print(json.dumps([[[n, str(f)] for n, f in found], absent]))
"""


def test_the_progress_page_tells_a_learners_copy_from_one_not_made_yet(hub_ready, tmp_path):
    """The service's split of the hub's users (in the hub's interpreter, as the hub runs it): a copy (shown),
    no copy or no account yet (listed as not logged in), an admin (neither)."""
    (tmp_path / "ada" / "mha-course" / ".mha-course").mkdir(parents=True)
    (tmp_path / "bob").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MHA_HUB_NOTEBOOKS")}
    env.update(MHA_HUB_ADMIN="teacher", PYTHONPATH=str(ROOT / "deploy" / "hub"))
    run = subprocess.run([str(HUB_PY), "-c", SPLIT, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    found, absent = json.loads(run.stdout.splitlines()[-1])
    assert found == [["ada", str(tmp_path / "ada" / "mha-course")]]
    assert absent == ["bob", "cy"]


def _wait_for(probe, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("not ready")


TAG = f"mhatest-{os.getpid()}-"           # this run's accounts: another run's, or a class's, are never touched
ADA, BOB, CY, TEACHER = (TAG + n for n in ("ada", "bob", "cy", "teacher"))
ADMIN_PASSWORD = "teacher-" + "x" * 30


def _launch(tmp, port, *args, password=None):
    """workshop_hub.py as `make hub` runs it, in a session of its own, its output in tmp/hub.log."""
    env = dict(os.environ, MHA_HUB_ADMIN_PASSWORD=ADMIN_PASSWORD)
    env.pop("PYTHONPATH", None)
    env.pop("MHA_HUB_PASSWORD", None)
    if password:
        env["MHA_HUB_PASSWORD"] = password
    tmp.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([str(HUB_PY), str(ROOT / "deploy" / "hub" / "workshop_hub.py"), "--port", str(port),
                             "--state", str(tmp / "state"), "--proxy", str(PROXY), *args],
                            env=env, stdout=open(tmp / "hub.log", "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(launcher, hub_id=None) -> list:
    """SIGTERM to the launcher's own process group (it started it: start_new_session), as Ctrl-C would;
    what this launcher started (its descendants, and the processes carrying its hub's id) still alive after."""
    import psutil
    try:
        started = psutil.Process(launcher.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    if launcher.poll() is None:
        os.killpg(launcher.pid, signal.SIGTERM)
    try:
        launcher.wait(90)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
    alive = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    alive += workshop_hub.processes_of_hub(hub_id) if hub_id else []
    return sorted({f"{p.pid}: {' '.join(p.cmdline())[:120]}" for p in alive if p.is_running()})


def _hub_id(pid: int) -> str:
    """The MHA_HUB_ID a learner's process (its server, a kernel) inherited from the hub that started it."""
    import psutil
    return psutil.Process(pid).environ()["MHA_HUB_ID"]


def _login(url, name, password, next_url=None):
    import requests
    s = requests.Session()
    s.get(url + "hub/login")
    r = s.post(url + "hub/login" + (f"?next={next_url}" if next_url else ""),
               data={"username": name, "password": password, "_xsrf": s.cookies.get("_xsrf")},
               allow_redirects=True, timeout=300)
    return s, r


class LiveHub:
    """The first hub of this module: two learners logged in, each with a kernel in notebook 02."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.port = _free_block()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.password = "workshop-" + os.urandom(4).hex()
        self.launcher = _launch(tmp, self.port, "--memory", "1.5", "--admin", TEACHER, password=self.password)
        self.sessions, self.kernels = {}, {}

    def login_learners(self):
        _wait(lambda: _get(self.url + "hub/api"), 120, self.launcher, self.log)
        for name in (ADA, BOB):
            s, r = _login(self.url, name, self.password)
            assert r.status_code == 200, (r.status_code, r.url)
            self.sessions[name] = s
        for name, s in self.sessions.items():
            _wait(lambda: _page(s, f"{self.url}user/{name}/lab"), 180, self.launcher, self.log)
            self.kernels[name] = _start_kernel(s, f"{self.url}user/{name}/", NOTEBOOK_02)
        self.hub_id = _hub_id(self.kernels[ADA].pid)

    @property
    def log(self):
        return self.tmp / "hub.log"


NOTEBOOK_02 = "mha-course/notebooks/02_scaled_dot_product.ipynb"


@pytest.fixture(scope="module")
def live_hub(hub_ready, tmp_path_factory):
    hub = LiveHub(tmp_path_factory.mktemp("live-hub"))
    hub.hub_id = None
    try:
        hub.login_learners()
        yield hub
    finally:
        hub.left = _stop(hub.launcher, hub.hub_id)
        workshop_hub.remove_learner_accounts([ADA, BOB, CY, TEACHER])  # this module's own accounts
    assert hub.launcher.returncode == 0, hub.log.read_text()[-3000:]
    assert not hub.left, f"still running after the hub stopped: {hub.left}"


def test_a_learner_logs_in_and_gets_a_private_student_copy(live_hub):
    import pwd

    import psutil
    url, names = live_hub.url, [ADA, BOB]
    import requests
    wrong = requests.Session()
    wrong.get(url + "hub/login")
    r = wrong.post(url + "hub/login", data={"username": ADA, "password": "not-the-password",
                                            "_xsrf": wrong.cookies.get("_xsrf")}, allow_redirects=False)
    assert r.status_code == 403, r.status_code
    for name, s in live_hub.sessions.items():
        model = _json(s, f"{url}user/{name}/api/contents/{NOTEBOOK_02}")
        assert model, "the student copy of notebook 02 is not in the learner's ~/mha-course/notebooks/"
        sources = "".join("".join(c["source"]) for c in model["content"]["cells"])
        assert "NotImplementedError" in sources and "### BEGIN SOLUTION" not in sources, "not a student copy"
        home = Path(f"/home/{name}")
        assert home.stat().st_mode & 0o777 == 0o700
        copy = home / "mha-course" / "notebooks" / "02_scaled_dot_product.ipynb"
        assert copy.stat().st_uid == pwd.getpwnam(name).pw_uid
        assert (home / "mha-course" / ".mha-course").is_dir()  # where the checkers record progress
    peek = subprocess.run(["runuser", "-u", names[1], "--", "ls", f"/home/{names[0]}"], capture_output=True)
    assert peek.returncode != 0, "one learner can read another's home"
    servers = [p for p in psutil.process_iter(["username", "cmdline", "environ"])
               if p.info["username"] == names[0] and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or [])]
    assert servers, "no server runs as the learner's own Unix user"
    assert servers[0].info["environ"]["OMP_NUM_THREADS"] == "1"
    assert servers[0].info["environ"]["MHA_COURSE_THREADS"] == "1"
    limit = int(1.5 * 1024 ** 3)  # --memory 1.5 (GiB), for each of the learner's processes
    kernel = live_hub.kernels[ADA]
    log = live_hub.log.read_text()
    if "per process (RLIMIT_DATA" in log:  # no systemd with cgroup v2 here: the banner says so
        assert _limit(servers[0].pid, "Max data size") == (limit, limit)
        assert _limit(kernel.pid, "Max data size") == (limit, limit), "the kernel did not inherit the limit"
        assert _limit(kernel.pid, "Max file size") == (limit, limit), "/dev/shm files are not bounded"
    else:
        assert "per learner (systemd unit" in log, log[-2000:]
    if "/dev/shm private to each learner" in log:
        df = subprocess.run(["nsenter", "-t", str(kernel.pid), "-m", "df", "-k", "--output=size", "/dev/shm"],
                            capture_output=True, text=True)
        assert int(df.stdout.split()[-1]) == limit // 1024, df.stdout


def test_state_is_private_and_jupyterlab_is_quiet(live_hub):
    state = live_hub.tmp / "state"
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "jupyterhub.sqlite").stat().st_mode & 0o777 == 0o600
    assert (state / "cookie_secret").stat().st_mode & 0o077 == 0
    s = live_hub.sessions[ADA]
    settings = _json(s, f"{live_hub.url}user/{ADA}/lab/api/settings/@jupyterlab/apputils-extension:notification")
    assert settings, "no JupyterLab settings from the learner's server"
    defaults = {k: v.get("default") for k, v in settings["schema"]["properties"].items()}  # overrides set them
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False
    assert live_hub.password not in live_hub.log.read_text()  # given by MHA_HUB_PASSWORD: never echoed


@pytest.mark.parametrize("name", ["nobody", "daemon", "root"])
def test_reserved_and_system_names_are_refused_at_login_with_a_message(live_hub, name):
    _, r = _login(live_hub.url, name, live_hub.password)
    assert r.status_code == 403
    assert "reserved or system name" in r.text or "existing account" in r.text, r.text[-1500:]


def _page_rows(session, url):
    r = session.get(url + "services/progress/?format=json", timeout=60)
    assert r.status_code == 200, (r.status_code, r.url)
    return {(row["learner"], row["exercise"]): row for row in r.json()["rows"]}


def test_the_progress_page_shows_who_finished_and_who_made_which_mistake(live_hub):
    """End to end: ada's softmax passes, bob's forgets the max; the admin's page shows both, live."""
    url = live_hub.url
    right = "import mha_course as mc\nfrom mha_course import check\ncheck.softmax(mc.softmax)"
    naive = ("import numpy as np\nfrom mha_course import check\n"
             "def my_softmax(x, axis=-1):\n    e = np.exp(x)\n    return e / e.sum(axis=axis, keepdims=True)\n"
             "check.softmax(my_softmax)")
    assert "✔ softmax" in _execute(live_hub.sessions[ADA], url, ADA, live_hub.kernels[ADA], right)
    assert "✘ softmax" in _execute(live_hub.sessions[BOB], url, BOB, live_hub.kernels[BOB], naive)
    teacher, r = _login(url, TEACHER, ADMIN_PASSWORD, next_url="/services/progress/")
    assert r.status_code == 200 and "/services/progress/" in r.url, (r.status_code, r.url)
    page = r.text
    assert '<meta http-equiv="refresh"' in page
    assert ADA in page and BOB in page and TEACHER not in page
    assert "<td class='done'" in page and "<td class='tried'" in page
    rows = _page_rows(teacher, url)
    assert rows[ADA, "softmax"]["state"] == "done"
    assert rows[BOB, "softmax"]["state"] == "tried" and rows[BOB, "softmax"]["mistake"], rows[BOB, "softmax"]
    assert rows[BOB, "softmax"]["mistake"] in page
    # live: bob fixes it, and the next load shows it
    fixed = "import mha_course as mc\nfrom mha_course import check\ncheck.softmax(mc.softmax)"
    assert "✔ softmax" in _execute(live_hub.sessions[BOB], url, BOB, live_hub.kernels[BOB], fixed)
    assert _page_rows(teacher, url)[BOB, "softmax"]["state"] == "done"
    # a learner may not see the class
    r = live_hub.sessions[ADA].get(url + "services/progress/", timeout=60)
    assert r.status_code == 403 and ADA + "</td>" not in r.text


def test_update_copies_runs_as_each_learner_and_keeps_their_edits(live_hub):
    copy = Path(f"/home/{ADA}/mha-course/notebooks/01_qkv.ipynb")
    edited = copy.read_text().replace("#", "# my note:", 1)
    copy.write_text(edited)
    run = subprocess.run([str(HUB_PY), str(ROOT / "deploy" / "hub" / "workshop_hub.py"), "--update-copies",
                          "--state", str(live_hub.tmp / "state")], capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{ADA}: student copy updated" in run.stdout and f"{BOB}: student copy updated" in run.stdout
    assert copy.read_text() == edited


def test_a_second_hub_and_bench_hub_leave_the_first_hubs_learners_alone(live_hub, tmp_path):
    """Another hub (own learner, stopped) and bench_hub --learners 2 beside a live class: its kernels survive."""
    import psutil
    import requests
    first = {name: (k.pid, k.create_time()) for name, k in live_hub.kernels.items()}
    # a second hub, with a generated password (never in its log), one learner, then stopped
    port = _free_block(live_hub.port + 4)
    second = _launch(tmp_path / "second", port)
    try:
        _wait(lambda: _get(f"http://127.0.0.1:{port}/hub/api"), 120, second, tmp_path / "second" / "hub.log")
        password_file = tmp_path / "second" / "state" / "password"
        _wait(lambda: password_file.exists() or None, 30, second, tmp_path / "second" / "hub.log")
        assert password_file.stat().st_mode & 0o777 == 0o600
        password = password_file.read_text().strip()
        assert password not in (tmp_path / "second" / "hub.log").read_text(), "the password is in the log"
        s, r = _login(f"http://127.0.0.1:{port}/", CY, password)
        assert r.status_code == 200
        _wait(lambda: _page(s, f"http://127.0.0.1:{port}/user/{CY}/lab"), 180, second, tmp_path / "second" / "hub.log")
        cy_server = next(p for p in psutil.process_iter(["username", "cmdline"]) if p.info["username"] == CY
                         and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or []))
        second_id = _hub_id(cy_server.pid)
        assert second_id != live_hub.hub_id
    finally:
        left = _stop(second, locals().get("second_id"))
    assert second.returncode == 0, (tmp_path / "second" / "hub.log").read_text()[-3000:]
    assert not left, f"the second hub left: {left}"
    assert not [p for p in psutil.process_iter(["username"]) if p.info["username"] == CY], "the second hub left cy's"
    # the benchmark, beside the live class
    out = tmp_path / "bench_hub.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([str(HUB_PY), str(ROOT / "benchmarks" / "bench_hub.py"), "--learners", "2",
                          "--json", str(out), "--no-progress"], capture_output=True, text=True, timeout=1800,
                         env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"2 learners: median [\d.]+ s, max [\d.]+ s, solo [\d.]+ s, errors 0, memory \d+ MiB per learner",
                        last), last
    result = json.loads(out.read_text())["2 learners, spread 0 s"]
    assert result["errors"] == 0 and result["memory_mib_per_learner"] > 50
    assert result["median_s"] <= result["max_s"]
    left = [n for n in workshop_hub.learner_accounts("mhabench-") if not Path(f"/proc/{n.split('-')[1]}").exists()]
    assert not left, f"the benchmark left learner accounts: {left}"
    # the first hub's learners: the same kernels, still running, still answering
    for name, (pid, created) in first.items():
        proc = psutil.Process(pid)
        assert proc.is_running() and proc.create_time() == created, f"{name}'s kernel was killed"
        assert "2" in _execute(live_hub.sessions[name], live_hub.url, name, live_hub.kernels[name], "print(1 + 1)")
    assert requests.get(live_hub.url + "hub/api", timeout=10).status_code == 200


def test_tls_is_required_off_loopback(hub_ready, tmp_path):
    """--ip 0.0.0.0 without TLS is refused before anything starts; --self-signed prints a fingerprint."""
    port = _free_block(9800)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MHA_HUB_PASSWORD"] = "workshop-" + os.urandom(4).hex()
    hub = [str(HUB_PY), str(ROOT / "deploy" / "hub" / "workshop_hub.py"), "--port", str(port), "--proxy", str(PROXY),
           "--state", str(tmp_path / "state")]
    run = subprocess.run(hub + ["--ip", "0.0.0.0"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2 and "plain HTTP" in run.stderr and "--self-signed" in run.stderr, run.stderr
    assert not (tmp_path / "state").exists()
    run = subprocess.run(hub + ["--ip", "0.0.0.0", "--ssl-cert", str(tmp_path / "missing.pem")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2 and "--ssl-key" in run.stderr
    for weak in ("short", "password123", "1234567890", "aaaaaaaaaaaa"):
        run = subprocess.run(hub, capture_output=True, text=True, timeout=300, env=dict(env, MHA_HUB_PASSWORD=weak))
        assert run.returncode == 2 and "password" in run.stderr, (weak, run.stderr)
    launcher = subprocess.Popen(hub + ["--ip", "127.0.0.1", "--self-signed"], env=env, stdout=open(tmp_path / "log", "wb"),
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: "fingerprint" in (tmp_path / "log").read_text() or None, 180, launcher, tmp_path / "log")
        import ssl
        pem = ssl.get_server_certificate(("127.0.0.1", port))
        import hashlib
        digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
        printed = re.search(r"((?:[0-9A-F]{2}:){31}[0-9A-F]{2})", (tmp_path / "log").read_text())[1]
        assert printed.replace(":", "") == digest, "the printed fingerprint is not the served certificate's"
        assert (tmp_path / "state" / "hub-key.pem").stat().st_mode & 0o777 == 0o600
    finally:
        left = _stop(launcher)
    assert not left, f"still running after the hub stopped: {left}"


# ---- helpers ----------------------------------------------------------------------------------
def _free_block(start: int = 9400) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_hub import free_port_block
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return free_port_block(start)


def _limit(pid: int, what: str) -> tuple:
    """(soft, hard) of the limit ``what`` ("Max data size", "Max file size") of process ``pid`` in bytes,
    from /proc/PID/limits (prlimit on another user's process may be refused even to root in a container)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(what):
            soft, hard = line[len(what):].split()[:2]
            return tuple(-1 if v == "unlimited" else int(v) for v in (soft, hard))
    raise AssertionError(f"no {what!r} in /proc/{pid}/limits")


def _xsrf(session):
    return next((c.value for c in session.cookies if c.name == "_xsrf" and c.path.startswith("/user/")),
                next(c.value for c in session.cookies if c.name == "_xsrf"))


def _start_kernel(session, server_url: str, notebook: str):
    """A kernel for ``notebook`` on a learner's server (a session, as JupyterLab opens it); its process (psutil)."""
    import psutil
    r = session.post(server_url + "api/sessions", json={"path": notebook, "type": "notebook",
                                                        "name": Path(notebook).name, "kernel": {"name": "python3"}},
                     headers={"X-XSRFToken": _xsrf(session)}, timeout=60)
    assert r.status_code == 201, (r.status_code, r.text[:300])
    kernel_id = r.json()["kernel"]["id"]
    deadline = time.time() + 60
    while time.time() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            if any(kernel_id in part for part in (p.info["cmdline"] or [])):
                p.kernel_id = kernel_id
                return p
        time.sleep(0.5)
    raise AssertionError(f"no process for kernel {kernel_id}")


def _execute(session, hub_url: str, name: str, kernel, code: str) -> str:
    """Run ``code`` in the learner's kernel over its websocket, as JupyterLab does; what it printed (and raised)."""
    import uuid

    from websocket import create_connection
    cookies = "; ".join(f"{c.name}={c.value}" for c in session.cookies)
    ws = create_connection(hub_url.replace("http://", "ws://") + f"user/{name}/api/kernels/{kernel.kernel_id}/channels",
                           header=[f"Cookie: {cookies}", f"X-XSRFToken: {_xsrf(session)}"],
                           origin=hub_url.rstrip("/"), timeout=300)
    msg_id, out = uuid.uuid4().hex, []
    try:
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": name,
                       "session": uuid.uuid4().hex, "date": "", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        replied = idle = False  # the reply (shell) and the outputs (iopub) come on two channels, in any order
        while not (replied and idle):
            raw = ws.recv()
            msg = json.loads(raw) if isinstance(raw, str) else {}
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
            elif msg["msg_type"] == "execute_reply":
                replied = True
            elif msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
        return "".join(out)
    finally:
        ws.close()


def _get(url):
    import requests
    try:
        return requests.get(url, timeout=3).status_code == 200 or None
    except requests.RequestException:
        return None


def _page(session, url):
    """True once ``url`` (a page of the learner's server) answers 200 from the server itself."""
    import requests
    try:
        r = session.get(url, timeout=30)
    except requests.RequestException:
        return None
    return (r.status_code == 200 and "/user/" in r.url and "/hub/" not in r.url) or None


def _json(session, url):
    """GET a JSON API with the learner's cookies (and the server's xsrf cookie, as JupyterLab sends it)."""
    import requests
    path = "/" + "/".join(url.split("/", 3)[3].split("/")[:2]) + "/"  # /user/<name>/
    xsrf = session.cookies.get("_xsrf", path=path) or session.cookies.get("_xsrf")
    try:
        r = session.get(url, timeout=10, headers={"X-XSRFToken": xsrf} if xsrf else {})
    except requests.RequestException:
        return None
    if r.status_code == 200 and r.headers.get("Content-Type", "").startswith("application/json"):
        return r.json()
    return None


def _wait(probe, timeout, launcher, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if launcher.poll() is not None:
            pytest.fail(f"the hub exited ({launcher.returncode}):\n{Path(log).read_text()[-3000:]}")
        got = probe()
        if got:
            return got
        time.sleep(0.5)
    pytest.fail(f"not ready within {timeout} s:\n{Path(log).read_text()[-3000:]}")


# ---- the language of each learner's copy (no hub needed: the config's own functions) ----------
def _config_functions():
    """read_learners / read_languages and what they use, taken out of deploy/hub/jupyterhub_config.py."""
    import ast
    src = (Path(__file__).resolve().parents[2] / "deploy" / "hub" / "jupyterhub_config.py").read_text()
    tree = ast.parse(src)
    keep = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in
                                     ("_learner_lines", "read_learners", "read_languages"))
            or (isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") in ("NAME", "COURSE_LANGS"))]
    space = {"re": re, "Path": Path, "check_password": workshop_hub.check_password, "HubError": workshop_hub.HubError}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "jupyterhub_config", "exec"), space)
    return space


def test_a_learner_may_ask_for_a_chinese_copy_in_the_learners_file(tmp_path):
    f = _config_functions()
    path = tmp_path / "learners.txt"
    path.write_text("ada\nbob:s3cret-pass-42\ncai::zh_CN   # 中文\ndu:own-password-77:zh_CN\n")
    assert f["read_learners"](path) == {"ada": None, "bob": "s3cret-pass-42", "cai": None, "du": "own-password-77"}
    assert f["read_languages"](path) == {"cai": "zh_CN", "du": "zh_CN"}
    path.write_text("eve::fr_FR\n")
    with pytest.raises(SystemExit, match="zh_CN"):
        f["read_languages"](path)


@pytest.mark.parametrize("line", ["bob:short", "bob:password123", "bob:1234567890", "bob:zzzzzzzzzzzz:zh_CN"])
def test_a_learners_own_password_is_held_to_the_workshop_passwords_rule(tmp_path, line):
    """A weak own password in the learners file stops the hub's start, naming the line and the learner."""
    path = tmp_path / "learners.txt"
    path.write_text(f"ada\n{line}\n")
    with pytest.raises(SystemExit, match=r"learners.txt:2: bob's own password (has \d+ characters|is a common one)"):
        _config_functions()["read_learners"](path)


def test_the_first_copy_and_the_update_pass_the_learners_language():
    src = (Path(__file__).resolve().parents[2] / "deploy" / "hub" / "jupyterhub_config.py").read_text()
    assert src.count('${{MHA_COURSE_COPY_LANG:+--lang "$MHA_COURSE_COPY_LANG"}}') == 2
    assert '"MHA_COURSE_COPY_LANG"' in src and "MHA_HUB_LANG" in src
