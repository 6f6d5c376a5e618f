"""`mha-course train TASK [--out PATH]` and what load_checkpoint/load_experiments accept.

The command writes ./checkpoints/TASK.npz in the current folder, never the package; a bad
--out is one line before any training; an existing file is kept as a backup. A file that is
no checkpoint is one ValueError naming it (never a hint to load it unsafely).
"""
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from cli_helpers import ROOT, one_line_error, read_only

from mha_course.lessons import checkpoints, model, training
from mha_course.tools import cli

SHIPPED = Path(checkpoints.CHECKPOINT_DIR)
TINY = model.Config(task="previous_token", vocab=6, seq_len=6, d_model=8, h=2, n_layers=1, batch=4, steps=3)


def shipped_hashes() -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(SHIPPED.iterdir())}


@pytest.fixture
def tiny_tasks():
    """Every task trains in a moment (the command's paths are what is tested here)."""
    with mock.patch.object(checkpoints, "CHECKPOINT_CONFIGS", {"previous_token": TINY, "induction": TINY._replace(
            task="induction", n_layers=2)}):
        yield


def train(*args):
    return cli.main(["train", *map(str, args)])


# ---------------------------------------------------------------- where it writes
def test_train_in_an_empty_folder_writes_checkpoints_there_and_leaves_the_package_alone(tmp_path):
    before = shipped_hashes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "mha_course.tools.cli", "train", "previous_token"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    written = tmp_path / "checkpoints" / "previous_token.npz"
    assert f"saved {written}" in run.stdout
    assert checkpoints.load_checkpoint(written)[0] == checkpoints.CHECKPOINT_CONFIGS["previous_token"]
    assert shipped_hashes() == before
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["previous_token.npz"]


@pytest.mark.parametrize("out, needle", [
    ("notes.ipynb", "not a .npz file"), ("nodir/x.npz", "does not exist"), ("existing_dir", "is a folder"),
    ("", "is empty"), ("notes.txt", "not a .npz file"), (str(SHIPPED / "induction.npz"), "never changes"),
    ("link.npz", "never changes")])
def test_a_bad_out_is_one_line_before_any_training(tmp_path, monkeypatch, capsys, out, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.ipynb").write_text('{"cells": []}')
    (tmp_path / "existing_dir").mkdir()
    (tmp_path / "link.npz").symlink_to(SHIPPED / "induction.npz")
    before, notebook = shipped_hashes(), (tmp_path / "notes.ipynb").read_bytes()
    with mock.patch.object(checkpoints, "train_checkpoint", side_effect=AssertionError("trained before checking")), \
            mock.patch.object(checkpoints, "run_experiments", side_effect=AssertionError("trained before checking")):
        assert train("previous_token", "--out", out) == 2
        one_line_error(capsys, needle, "--out")
        assert train("experiments", "--out", out) == 2
        one_line_error(capsys, needle)
    assert (tmp_path / "notes.ipynb").read_bytes() == notebook and shipped_hashes() == before
    assert not (tmp_path / "checkpoints").exists()


def test_a_read_only_folder_is_refused_before_any_training(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locked").mkdir()
    read_only(tmp_path / "locked", True)
    try:
        with mock.patch.object(checkpoints, "train_checkpoint", side_effect=AssertionError("trained before checking")):
            assert train("previous_token", "--out", "locked/x.npz") == 2
    finally:
        read_only(tmp_path / "locked", False)
    one_line_error(capsys, "not writable", "locked")
    assert os.listdir(tmp_path / "locked") == []


def test_an_existing_checkpoint_is_kept_as_a_backup(tmp_path, monkeypatch, capsys, tiny_tasks):
    monkeypatch.chdir(tmp_path)
    assert train("previous_token") == 0
    first = (tmp_path / "checkpoints" / "previous_token.npz").read_bytes()
    assert train("previous_token") == 0
    assert "kept the previous previous_token.npz as" in capsys.readouterr().out
    backups = sorted((tmp_path / "checkpoints").glob("previous_token.npz.*.bak"))
    assert [b.read_bytes() for b in backups] == [first]
    assert train("previous_token") == 0  # the same second: a second backup, the first one kept
    assert len(list((tmp_path / "checkpoints").glob("previous_token.npz.*.bak"))) == 2


def test_out_through_a_symlink_writes_the_real_file(tmp_path, monkeypatch, tiny_tasks):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store").mkdir()
    (tmp_path / "mine.npz").symlink_to("store/real.npz")
    assert train("previous_token", "--out", "mine.npz") == 0
    assert (tmp_path / "mine.npz").is_symlink() and checkpoints.load_checkpoint(tmp_path / "store" / "real.npz")


def test_a_checkpoint_written_by_the_command_is_readable_by_others(tmp_path, monkeypatch, tiny_tasks):
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        assert train("previous_token") == 0
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "checkpoints" / "previous_token.npz").st_mode & 0o777 == 0o644


# ---------------------------------------------------------------- what load_checkpoint accepts
def npz_with(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def good_arrays(config=TINY):
    params, history = training.train(config, snapshot_every=1)
    return checkpoints.checkpoint_arrays(params, config, history)


def with_config(arrays, text):
    return {**arrays, "config": np.array(text)}


def huge_header_npz() -> bytes:
    """An .npz whose one member's header claims a (10**6, 10**6) float64 array (8 TB) in 200 bytes."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros((2, 2)))
    header["shape"] = (10**6, 10**6)
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    member.write(b"\0" * 64)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("embed.npy", member.getvalue())
    return buffer.getvalue()


def bad_checkpoints():
    arrays = good_arrays()
    config = json.loads(str(arrays["config"]))
    one_layer = checkpoints.checkpoint_arrays(*training.train(TINY)[:1], TINY)
    three = with_config(one_layer, json.dumps({**config, "n_layers": 3}))
    whole = npz_with(**arrays)
    return {
        "text file": (b"just some notes\n", "not an .npz checkpoint"),
        "a notebook": (b'{"cells": [], "nbformat": 4}', "not an .npz checkpoint"),
        "truncated": (whole[: len(whole) // 2], "not an .npz checkpoint"),
        "no config": (npz_with(**{k: v for k, v in arrays.items() if k != "config"}), "has no config"),
        "config not JSON": (npz_with(**with_config(arrays, "{task: induction")), "config is not JSON"),
        "config a list": (npz_with(**with_config(arrays, "[1, 2]")), "not an object"),
        "config extra field": (npz_with(**with_config(arrays, json.dumps({**config, "colour": "red"}))),
                               "does not know: ['colour']"),
        "config invalid": (npz_with(**with_config(arrays, json.dumps({**config, "h": 3}))), "not divisible"),
        "n_layers=3, one layer stored": (npz_with(**three), "missing ['layer1.W_k'"),
        "an extra layer": (npz_with(**arrays, **{"layer5.W_q": arrays["layer0.W_q"]}), "not expected ['layer5.W_q']"),
        "a wrong shape": (npz_with(**{**arrays, "embed": np.zeros((2, 2))}), "'embed' is float64 (2, 2)"),
        "NaN weights": (npz_with(**{**arrays, "unembed": np.full_like(arrays["unembed"], np.nan)}), "finite"),
        "partial history": (npz_with(**{k: v for k, v in arrays.items() if k != "history.losses"}),
                            "history is partial"),
        "pickled objects": (npz_with(**{**arrays, "embed": np.array([{"a": 1}], dtype=object)}),
                            "holds Python objects"),
        "a 1e6 x 1e6 header": (huge_header_npz(), "claims shape (1000000, 1000000)"),
    }


BAD = bad_checkpoints()


@pytest.mark.parametrize("name", BAD)
def test_a_bad_checkpoint_is_one_value_error_naming_the_file(tmp_path, name):
    data, needle = BAD[name]
    path = tmp_path / "m.npz"
    path.write_bytes(data)
    with pytest.raises(ValueError) as err:
        checkpoints.load_checkpoint(path)
    message = str(err.value)
    assert type(err.value) is ValueError and needle in message and str(path) in message, message
    assert "allow_pickle" not in message and "unsafe" not in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("name", ["text file", "truncated", "pickled objects", "a 1e6 x 1e6 header"])
def test_a_bad_experiments_file_is_one_value_error(tmp_path, name):
    data = BAD[name][0] if name != "pickled objects" else npz_with(h_sweep_hs=np.array([{"a": 1}], dtype=object))
    path = tmp_path / "e.npz"
    path.write_bytes(data)
    with pytest.raises(ValueError) as err:
        checkpoints.load_experiments(path)
    assert type(err.value) is ValueError and "not an .npz experiments file" in str(err.value)
    assert "allow_pickle" not in str(err.value)


def test_the_shipped_checkpoints_load_whole():
    for task in checkpoints.CHECKPOINT_CONFIGS:
        config, params, history = checkpoints.load_checkpoint(checkpoints.checkpoint_path(task))
        assert len(params.layers) == config.n_layers and history is not None
    assert "h_sweep_losses" in checkpoints.load_experiments()


def test_a_good_checkpoint_round_trips_through_the_bytes_the_command_writes(tmp_path):
    params, history = training.train(TINY, snapshot_every=1)
    path = tmp_path / "m.npz"
    path.write_bytes(checkpoints.checkpoint_bytes(params, TINY, history))
    config, loaded, hist = checkpoints.load_checkpoint(path)
    assert config == TINY and np.array_equal(loaded.embed, params.embed)
    assert np.array_equal(hist.losses, history.losses)
