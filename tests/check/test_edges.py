"""Edge cases derived from an exercise's declared sizes (check/edges.py): a branch for one query,
one key or one head is tried whatever the exercise's own cases are."""
import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check import edges, engine


def _scores(Q, K):
    """Q (..., T, d), K (..., S, d) -> scores (..., T, S)."""
    return Q @ np.swapaxes(K, -1, -2)


def _cases():
    rng = np.random.default_rng(3)
    return [engine.Case((rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))))]


TOY = engine.Exercise("toy_edges", _scores, _cases, edges=("T", "S"), register=False)


def test_each_declared_size_is_cut_to_one_on_every_array_it_names():
    derived = edges.edge_cases(TOY, _cases(), TOY.edges)
    assert [[a.shape for a in c.args] for c in derived] == [[(2, 1, 4), (2, 5, 4)], [(2, 3, 4), (2, 1, 4)]]
    assert [c.note.split(":")[0] for c in derived] == ["T = 1", "S = 1"]
    first = _cases()[0].args
    assert np.array_equal(derived[0].args[0][:, 0], first[0][:, 0])  # the first entry kept, not a new draw


def test_the_checker_runs_the_edge_cases_after_its_own():
    assert len(TOY.expected()) == 3


def test_a_size_the_cases_already_have_at_one_is_not_added_again():
    one = lambda: [engine.Case((np.ones((1, 4)), np.ones((3, 4)))), engine.Case((np.ones((2, 4)), np.ones((3, 4))))]  # noqa: E731
    ex = engine.Exercise("toy_has_one", _scores, one, edges=("T", "S"), register=False)
    assert [c.note.split(":")[0] for c in edges.edge_cases(ex, one(), ex.edges)] == ["S = 1"]


def test_an_input_the_reference_refuses_is_not_made_a_case():
    def ref(Q, K):
        """Q (T, d), K (S, d) -> scores (T, S)."""
        if Q.shape[0] < 2:
            raise ValueError("T must be at least 2")
        return Q @ K.T
    ex = engine.Exercise("toy_refused", ref, lambda: [engine.Case((np.ones((3, 2)), np.ones((4, 2))))],
                         edges=("T",), register=False)
    assert edges.edge_cases(ex, ex.cases(), ex.edges) == []


def test_an_int_argument_named_by_the_size_is_set_to_one():
    def ref(x, T):
        """x (T, d) -> y (T, d)."""
        return x[:T]
    assert edges.cut_to_one(ref, (np.ones((3, 2)), 3), "T")[1] == 1
    assert edges.cut_to_one(ref, (np.ones((1, 2)), 1), "T") is None


def _one_query_special(Q, K, V, mask=None):
    out, w = mc.scaled_dot_product_attention(Q, K, V, mask)
    return (V[..., :1, :], w) if Q.shape[-2] == 1 else (out, w)  # a branch for one query, wrong


def test_a_branch_for_one_query_is_refused_and_said_as_an_edge(capsys):
    assert not check.scaled_dot_product_attention(_one_query_special)
    out = capsys.readouterr().out
    assert "T = 1" in out and "only" in out


@pytest.mark.parametrize("name", sorted(n for n, e in engine.catalogue().items() if getattr(e, "edges", ())))
def test_every_declared_edge_is_a_case_or_already_one(name):
    ex = engine.catalogue()[name]
    own = [c.args for c in ex.cases()] if callable(ex.cases) else []
    notes = [c.note for c, _ in ex.expected()]
    for symbol in ex.edges:
        cut = any(n.startswith(f"{symbol} = 1:") for n in notes)
        has = any(edges.cut_to_one(ex.reference, a, symbol) is None for a in own)
        assert cut or has, (name, symbol)


def test_a_cut_that_leaves_an_empty_result_is_not_a_case():
    def ref(X, W, h, i):
        """X (T, d_model), W (d_model, d_model) -> Q_i (T, d_k)."""
        d_k = W.shape[1] // h
        return X @ W[:, i * d_k:(i + 1) * d_k]
    ex = engine.Exercise("toy_index", ref, lambda: [engine.Case((np.ones((3, 4)), np.ones((4, 4)), 2, 1))],
                         edges=("h",), register=False)
    assert edges.edge_cases(ex, ex.cases(), ex.edges) == []  # head 1 of one head does not exist
