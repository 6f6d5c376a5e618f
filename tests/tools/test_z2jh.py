"""deploy/zero-to-jupyterhub/values.yaml: the keys the Helm chart reads, and numbers from our measurements.

Nothing is deployed here (no Kubernetes). What is checked:
- it is YAML, and every key is one the `jupyterhub` chart (4.x) reads at that place, with the type
  its values schema gives (the chart's schema forbids unknown keys in these sections, so a typo
  such as ``singleuser.memory.guarantees`` would make `helm install` fail);
- the course image, the first-login student copy (``lifecycleHooks.postStart`` runs
  ``mha-course student``), the default URL inside that copy, one BLAS thread, idle culling on;
- memory and CPU: guarantee <= limit, and the memory guarantee covers the per-learner memory
  measured by benchmarks/bench_hub.py (benchmarks/results/bench_hub.json), the limit its peak.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with jupyterlab)")

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "zero-to-jupyterhub" / "values.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "bench_hub.json"

ANY = object()        # a mapping the chart passes on as it is (traitlets config, env, a k8s lifecycle handler)
NUMBER = (int, float)
QUANTITY = (int, float, str)
NULLABLE_INT = (int, type(None))
# The keys the chart reads in the sections we set (from its values schema), and their types.
CHART_KEYS = {
    "hub": {"config": ANY, "extraConfig": ANY, "extraEnv": ANY, "concurrentSpawnLimit": NULLABLE_INT,
            "consecutiveFailureLimit": NULLABLE_INT, "activeServerLimit": NULLABLE_INT, "baseUrl": str,
            "cookieSecret": (str, type(None)), "resources": ANY, "db": ANY, "nodeSelector": ANY,
            "allowNamedServers": (bool, type(None)), "shutdownOnLogout": (bool, type(None))},
    "proxy": {"service": {"type": str, "annotations": ANY, "loadBalancerIP": (str, type(None)),
                          "nodePorts": ANY, "extraPorts": list},
              "https": {"enabled": bool, "type": str, "hosts": list, "letsencrypt": ANY, "manual": ANY},
              "chp": ANY, "traefik": ANY, "secretToken": (str, type(None))},
    "singleuser": {
        "image": {"name": str, "tag": str, "pullPolicy": (str, type(None)), "pullSecrets": list},
        "memory": {"guarantee": QUANTITY, "limit": QUANTITY},
        "cpu": {"guarantee": NUMBER, "limit": NUMBER},
        "extraEnv": ANY, "defaultUrl": str, "cmd": (list, str, type(None)),
        "lifecycleHooks": {"postStart": ANY, "preStop": ANY},
        "storage": {"type": str, "capacity": str, "homeMountPath": str, "extraVolumes": ANY,
                    "extraVolumeMounts": ANY, "dynamic": ANY, "static": ANY, "extraLabels": ANY},
        "startTimeout": NULLABLE_INT, "nodeSelector": ANY, "profileList": list, "extraFiles": ANY,
        "networkPolicy": ANY, "uid": NULLABLE_INT, "fsGid": NULLABLE_INT,
    },
    "cull": {"enabled": bool, "users": (bool, type(None)), "adminUsers": (bool, type(None)),
             "removeNamedServers": (bool, type(None)), "timeout": NULLABLE_INT, "every": NULLABLE_INT,
             "concurrency": NULLABLE_INT, "maxAge": NULLABLE_INT},
    "scheduling": {"userScheduler": {"enabled": bool, "replicas": int},
                   "podPriority": {"enabled": bool},
                   "userPlaceholder": {"enabled": bool, "replicas": int, "resources": ANY},
                   "corePods": ANY, "userPods": ANY},
    "prePuller": {"hook": {"enabled": bool, "pullOnlyOnChanges": bool}, "continuous": {"enabled": bool}},
}

UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def k8s_bytes(quantity) -> float:
    """A Kubernetes memory quantity (``768M``, ``2Gi``, ``1e9``) -> bytes.

    >>> k8s_bytes("768M"), k8s_bytes("1Gi")
    (768000000, 1073741824)
    """
    if isinstance(quantity, (int, float)):
        return quantity
    m = re.fullmatch(r"([0-9.]+)([kMGT]i?|)", str(quantity).strip())
    assert m, f"{quantity!r} is not a Kubernetes memory quantity (e.g. 768M, 2Gi)"
    return float(m.group(1)) * UNITS[m.group(2)] if "." in m.group(1) else int(m.group(1)) * UNITS[m.group(2)]


@pytest.fixture(scope="module")
def values():
    return yaml.safe_load(VALUES.read_text(encoding="utf-8"))


def _check(node, spec, path, problems):
    for key, value in node.items():
        where = f"{path}.{key}" if path else key
        if key not in spec:
            problems.append(f"{where}: not a key the chart reads here (known: {', '.join(sorted(spec))})")
            continue
        expected = spec[key]
        if expected is ANY:
            continue
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                problems.append(f"{where}: should be a mapping, is {value!r}")
            else:
                _check(value, expected, where, problems)
        else:
            allowed = expected if isinstance(expected, tuple) else (expected,)
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                problems.append(f"{where}: {value!r} has the wrong type")  # (True is an int to Python)


def test_every_key_is_one_the_chart_reads(values):
    problems = []
    _check(values, CHART_KEYS, "", problems)
    assert not problems, "\n".join(problems)


def test_the_checker_catches_a_typo():
    problems = []
    _check({"singleuser": {"memory": {"guarantees": "1G"}}, "cul": {}}, CHART_KEYS, "", problems)
    assert len(problems) == 2 and "singleuser.memory.guarantees" in problems[0]


def test_the_course_image_and_the_first_login_copy(values):
    single = values["singleuser"]
    assert single["image"]["name"] and single["image"]["tag"]
    command = " ".join(single["lifecycleHooks"]["postStart"]["exec"]["command"])
    assert 'mha-course student "$HOME/mha-course"' in command
    assert '[ -e "$HOME/mha-course/notebooks" ] ||' in command, "a later login must not touch the copy"
    assert single["defaultUrl"] == "/lab/tree/mha-course/notebooks/00_overview.ipynb"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MHA_COURSE_THREADS"):
        assert single["extraEnv"][var] == "1", var
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] >= 600
    assert values["hub"]["config"]["JupyterHub"]["authenticator_class"]
    assert "user_password" not in str(values["hub"]["config"]), "no password in the repository"


def test_guarantees_and_limits_cover_what_was_measured(values):
    memory, cpu = values["singleuser"]["memory"], values["singleuser"]["cpu"]
    assert k8s_bytes(memory["guarantee"]) <= k8s_bytes(memory["limit"])
    assert 0 < cpu["guarantee"] <= cpu["limit"]
    assert cpu["limit"] >= int(values["singleuser"]["extraEnv"]["OMP_NUM_THREADS"])
    runs = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert runs, f"{RESULTS} has no runs"
    for name, run in runs.items():
        measured = run["memory_mib_per_learner"] * 2**20
        assert k8s_bytes(memory["guarantee"]) >= measured, f"{name}: the guarantee is below the measured memory"
        assert k8s_bytes(memory["limit"]) >= 2 * (run["memory_mib_max"] or 0) * 2**20, (
            f"{name}: the limit leaves less than twice the measured peak")
