"""deploy/zero-to-jupyterhub/values.yaml: valid for the chart, safe for a class, sized by our measurements.

Nothing is deployed here (no Kubernetes). What is checked:
- merged onto the chart's defaults as helm merges them, it validates against the chart's own
  values.schema.yaml (jupyterhub chart 4.4.0, vendored in deploy/zero-to-jupyterhub/chart-4.4.0/
  with the commit it came from), which forbids unknown keys: a typo such as
  ``singleuser.memory.guarantees`` fails here as it would fail `helm install`;
- https on (letsencrypt or manual), a real authenticator with an allowed-users list (no shared
  password, no allow_all), the hub on the core node pool (node affinity required);
- the course image's recipe (deploy/zero-to-jupyterhub/Dockerfile) installs torch==2.13.0 for
  notebook 12 and keeps JupyterLab quiet; the first-login student copy fails visibly (no ``|| true``),
  later logins update; the default URL inside that copy, one BLAS thread, idle culling on;
- the notes: the 2G limit is an OOM kill, not a MemoryError; storage attach limits;
- memory and CPU: guarantee <= limit, and the memory guarantee covers the per-learner memory
  measured by benchmarks/bench_hub.py (benchmarks/results/bench_hub.json), the limit its peak.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with jupyterlab)")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (it comes with jupyterlab)")

ROOT = Path(__file__).resolve().parents[2]
Z2JH = ROOT / "deploy" / "zero-to-jupyterhub"
VALUES = Z2JH / "values.yaml"
CHART = Z2JH / "chart-4.4.0"
DOCKERFILE = Z2JH / "Dockerfile"
RESULTS = ROOT / "benchmarks" / "results" / "bench_hub.json"


def helm_merge(defaults, values):
    """``values`` over the chart's ``defaults`` as helm merges them: maps key by key, anything else replaced,
    a null deleting the default."""
    out = copy.deepcopy(defaults)
    for key, value in values.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = helm_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load((CHART / "values.schema.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def defaults():
    return yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def values():
    return yaml.safe_load(VALUES.read_text(encoding="utf-8"))


def schema_errors(schema, defaults, values) -> list:
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(helm_merge(defaults, values))]


def test_the_vendored_schema_names_its_version():
    for name in ("values.schema.yaml", "values.yaml"):
        head = (CHART / name).read_text(encoding="utf-8").splitlines()[:2]
        assert re.search(r"zero-to-jupyterhub-k8s/blob/[0-9a-f]{40}/jupyterhub/" + re.escape(name), head[0]), head
        assert "chart 4.4.0" in head[1]
    assert "--version 4.4.0" in VALUES.read_text(encoding="utf-8")


def test_the_values_validate_against_the_charts_schema(schema, defaults, values):
    assert schema_errors(schema, defaults, {}) == [], "the chart's own defaults do not validate"
    problems = schema_errors(schema, defaults, values)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("typo", [{"singleuser": {"memory": {"guarantees": "1G"}}}, {"cul": {"enabled": True}},
                                  {"proxy": {"https": {"enabled": "yes"}}},
                                  {"scheduling": {"corePods": {"nodeAffinity": {"matchNodePurpose": "always"}}}}])
def test_the_schema_catches_a_typo(schema, defaults, values, typo):
    assert schema_errors(schema, defaults, helm_merge(values, typo))


def test_https_a_real_authenticator_and_the_hub_on_the_core_nodes(values):
    https = values["proxy"]["https"]
    assert https["enabled"] is True and https["type"] in ("letsencrypt", "manual")
    assert https["hosts"] and (https["type"] != "letsencrypt" or https["letsencrypt"]["contactEmail"])
    config = values["hub"]["config"]
    assert config["JupyterHub"]["authenticator_class"] not in ("shared-password", "dummy", "null")
    assert "allowed_users" in config["Authenticator"] and not config["Authenticator"].get("allow_all")
    assert config["NativeAuthenticator"]["minimum_password_length"] >= 10
    assert "user_password" not in str(config), "no password in the repository"
    assert values["scheduling"]["corePods"]["nodeAffinity"]["matchNodePurpose"] == "require"


def test_the_image_has_torch_for_notebook_12_and_a_quiet_jupyterlab():
    recipe = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"pip install [^\n]*torch==2\.13\.0", recipe)
    assert "COPY deploy/hub/jupyterlab-overrides.json /usr/local/share/jupyter/lab/settings/overrides.json" in recipe
    quiet = json.loads((ROOT / "deploy" / "hub" / "jupyterlab-overrides.json").read_text())
    assert quiet["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert "/srv/mha-course" in recipe and "jupyterhub==5.5.0" in recipe


def test_the_first_login_copy_fails_visibly_and_later_logins_update(values):
    single = values["singleuser"]
    assert single["image"]["name"] and single["image"]["tag"]
    command = " ".join(single["lifecycleHooks"]["postStart"]["exec"]["command"])
    assert 'mha-course student "$HOME/mha-course" --notebooks /srv/mha-course/notebooks/*.ipynb' in command
    assert "|| true" not in command and "exit 1" in command, "a failed first copy must stop the start"
    assert 'mha-course student --update "$HOME/mha-course"' in command
    assert single["defaultUrl"] == "/lab/tree/mha-course/notebooks/00_overview.ipynb"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MHA_COURSE_THREADS"):
        assert single["extraEnv"][var] == "1", var
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] >= 600


def test_the_notes_on_the_memory_limit_and_storage():
    flat = re.sub(r"\s*\n\s*#\s*", " ", VALUES.read_text(encoding="utf-8"))  # the comments as one text
    assert "OOM-killed" in flat and "not the MemoryError" in flat
    assert "attach limit" in flat and "allocatable.count" in flat


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
