"""The tiny model's checkpoints (lessons/checkpoints.py): the shipped files, saving, loading.

The shipped checkpoints' first losses are re-made by training again, and their accuracy and head
scores pass thresholds; a round trip keeps every array and a failed write leaves the old file whole;
the shipped experiments are re-made by training again.
"""
import argparse
from unittest import mock

import numpy as np
import pytest

import mha_course as mc
from mha_course.lessons import checkpoints, training
from mha_course.lessons import model as tr
from mha_course.tools import train as train_command

TINY = tr.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=3)


@pytest.mark.parametrize("task", sorted(t for t in checkpoints.CHECKPOINT_CONFIGS if not t.startswith("long_")))
def test_shipped_checkpoint_is_reproducible_and_trained(task):  # notebook 13's long_*: tests/lessons/test_long_context.py
    config, params, history = checkpoints.load_checkpoint(checkpoints.checkpoint_path(task))
    assert config == checkpoints.CHECKPOINT_CONFIGS[task]
    _, again = training.train(config._replace(steps=5))
    assert np.allclose(again.losses, history.losses[:5], rtol=0, atol=1e-9)
    metrics = training.evaluate(params, config, np.random.default_rng(99))
    assert metrics.accuracy >= 0.95
    batch = tr.make_batch(config, np.random.default_rng(7), 64)
    _, weights = tr.forward(params, batch.tokens, config)
    assert mc.previous_token_score(weights[0]).max() > 0.5  # a previous-token head in layer 1
    if task == "induction":
        assert tr.induction_score(weights[1], batch).max() > 0.5  # an induction head in layer 2
    assert checkpoints.checkpoint_path(task).stat().st_size < 300_000


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_and_atomic_write(tmp_path):
    params, history = training.train(TINY._replace(h_kv=1), snapshot_every=1)
    path = checkpoints.save_checkpoint(tmp_path / "m.npz", params, TINY._replace(h_kv=1), history)
    config, loaded, hist = checkpoints.load_checkpoint(path)
    assert config == TINY._replace(h_kv=1) and hist.snapshot_weights.shape == (3, 2, 2, 6, 6)
    one_kv = TINY._replace(h_kv=1)
    for a, b in zip(checkpoints.checkpoint_arrays(params, one_kv).values(), checkpoints.checkpoint_arrays(loaded, one_kv).values()):
        assert np.array_equal(a, b)
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file left behind
    with mock.patch.object(tr.np, "savez_compressed", side_effect=OSError("disk full")):
        with pytest.raises(OSError):
            checkpoints.save_checkpoint(path, params, one_kv, history)
    assert checkpoints.load_checkpoint(path)[0] == TINY._replace(h_kv=1)  # the old file is whole
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_train_command_writes_a_checkpoint(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    train_command.add_train_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "previous_token", "--out", str(tmp_path / "p.npz")])
    small = {"previous_token": TINY._replace(task="previous_token", n_layers=1)}
    with mock.patch.object(checkpoints, "CHECKPOINT_CONFIGS", small):
        assert args.func(args) == 0
    assert "saved" in capsys.readouterr().out and checkpoints.load_checkpoint(tmp_path / "p.npz")[0].n_layers == 1



def test_shipped_experiments_are_reproducible():
    exp = checkpoints.load_experiments()
    assert list(exp["h_sweep_hs"]) == list(checkpoints.SWEEP_HS)
    assert exp["h_sweep_losses"].shape == (3, len(checkpoints.SWEEP_HS), checkpoints.SWEEP_STEPS)
    assert exp["seeds"].tolist() == [0, 1, 2] and exp["dropout_10_losses_seeds"].shape == (3, base_steps := 800)
    assert base_steps == checkpoints.CHECKPOINT_CONFIGS["induction"].steps
    base = checkpoints.CHECKPOINT_CONFIGS["induction"]
    again = training.train(base._replace(h=2, steps=3, seed=1))[1].losses  # seed 1, h = 2: row 1, column 1
    assert np.allclose(again, exp["h_sweep_losses"][1, 1, :3], rtol=0, atol=1e-9)
    again = training.train(base._replace(h=4, steps=3, seed=2))[1].losses  # seed 2, h = 4: row 2, column 2
    assert np.allclose(again, exp["h_sweep_losses"][2, 2, :3], rtol=0, atol=1e-9)
    again = training.train(checkpoints.SCALE_CONFIG._replace(scale=False, steps=3))[1].losses
    assert np.allclose(again, exp["scale_off_losses"][:3], rtol=0, atol=1e-9)
    again = training.train(base._replace(dropout=0.1, steps=3, seed=1))[1].losses
    assert np.allclose(again, exp["dropout_10_losses_seeds"][1, :3], rtol=0, atol=1e-9)
    assert float(exp["one_layer_accuracy"]) < 0.5 < float(exp["dropout_0_accuracy"])
    with pytest.raises(ValueError, match="no experiments file"):
        checkpoints.load_experiments("/nonexistent/e.npz")


# ----------------------------------------------------------------------------- every entry checks
@pytest.mark.parametrize("bad", [None, 3, b"m.npz", ""])
def test_a_path_that_is_none_or_not_path_like_is_refused_by_name(bad, tmp_path):
    """It was a TypeError from os.fspath naming no argument."""
    params = tr.init_model(TINY)
    for call in (lambda: checkpoints.load_checkpoint(bad), lambda: checkpoints.read_npz(bad),
                 lambda: checkpoints.write_npz(bad, {"a": np.zeros(2)}),
                 lambda: checkpoints.save_checkpoint(bad, params, TINY)):
        with pytest.raises(ValueError, match="path=.* must be a file path"):
            call()
    if bad is not None:  # None is the shipped file
        with pytest.raises(ValueError, match="path=.* must be a file path"):
            checkpoints.load_experiments(bad)
    with pytest.raises(ValueError, match="no checkpoint at path="):
        checkpoints.read_npz(tmp_path / "missing.npz")


def test_a_refused_write_leaves_the_old_file_whole(tmp_path):
    """Bad arrays, params of another config or a broken history are refused before the file is touched."""
    params, history = training.train(TINY, snapshot_every=1)
    path = checkpoints.save_checkpoint(tmp_path / "m.npz", params, TINY, history)
    before = path.read_bytes()
    for call, named in ((lambda: checkpoints.write_npz(path, None), "arrays must be a dict"),
                        (lambda: checkpoints.write_npz(path, {"a": np.array([object()])}), "would be pickled"),
                        (lambda: checkpoints.write_npz(path, {"": np.zeros(2)}), "each name must be"),
                        (lambda: checkpoints.save_checkpoint(path, params, TINY._replace(h_kv=1)), "params.layers"),
                        (lambda: checkpoints.save_checkpoint(path, params, TINY, 3), "history must be"),
                        (lambda: checkpoints.save_checkpoint(path, "params", TINY), "params must be")):
        with pytest.raises(ValueError, match=named):
            call()
        assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file either


def test_npz_bytes_and_checkpoint_arrays_name_their_arguments():
    for bad in (None, "arrays", 3, [np.zeros(2)]):
        with pytest.raises(ValueError, match="arrays must be a dict"):
            checkpoints.npz_bytes(bad)
    params = tr.init_model(TINY)
    for bad in ("history", 3):
        with pytest.raises(ValueError, match="history must be a training.History"):
            checkpoints.checkpoint_bytes(params, TINY, bad)
    assert checkpoints.check_arrays({"a": [1, 2]})["a"].dtype.kind == "i"


def test_a_task_that_is_no_name_is_refused_before_training():
    for bad in (["induction"], None, "inductoin"):
        with pytest.raises(ValueError, match="no shipped checkpoint for task="):
            checkpoints.checkpoint_path(bad)
        with pytest.raises(ValueError, match="no shipped checkpoint for task="):
            checkpoints.make_checkpoint(bad, "unused.npz")


def test_writing_to_a_folder_or_into_a_missing_folder_is_refused_in_one_line(tmp_path):
    """They were an IsADirectoryError about a temporary file and a FileNotFoundError."""
    for bad, named in ((tmp_path, "is a folder"), (tmp_path / "no" / "m.npz", "does not exist")):
        with pytest.raises(ValueError, match=named):
            checkpoints.write_npz(bad, {"a": np.zeros(2)})
        with pytest.raises(ValueError, match=named):
            checkpoints.save_checkpoint(bad, tr.init_model(TINY), TINY)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="not a rectangular array"):
        checkpoints.npz_bytes({"a": [[1], [1, 2]]})


def test_save_checkpoint_refuses_a_path_that_is_not_npz_and_writes_nothing(tmp_path):
    params = tr.init_model(TINY)
    for name in ("model.pt", "model", "model.npz.bak"):
        with pytest.raises(ValueError, match=r"must end in \.npz"):
            checkpoints.save_checkpoint(tmp_path / name, params, TINY)
    assert list(tmp_path.iterdir()) == []
    assert checkpoints.load_checkpoint(checkpoints.save_checkpoint(tmp_path / "m.npz", params, TINY))[0] == TINY
